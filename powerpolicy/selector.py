"""NODE_SELECTOR: which nodes the power controller manages.

The text is a Kubernetes label selector, so an operator coming from Joulie
writes the same string here as in its deployment. Requirements are joined by
commas and must all hold:

==================  ======================================================
``key``             the label is present (any value)
``!key``            the label is absent
``key=v``           present with value v (``key==v`` is the same)
``key!=v``          absent, or present with another value
``key in (a,b)``    present with one of the values
``key notin (a,b)`` absent, or present with none of the values
==================  ======================================================

Keys are ``[prefix/]name`` and values follow Kubernetes' syntax (63
characters at most: letters, digits, ``-_.``, starting and ending with a
letter or digit; a value may be empty). Anything else is refused with a
``SelectorError`` naming the position, so a typo stops the service at start-up
instead of quietly selecting no node: Kubernetes' ``<``/``>`` forms and
``key=(a,b)`` included. The empty selector selects every node.
"""

import dataclasses
import re

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_NAME_RE = re.compile(_NAME)
_VALUE_RE = re.compile(f"({_NAME})?")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PREFIX_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")

# Characters that end a word; everything else (but whitespace) belongs to one.
_SPECIAL = "!=(),<>"

EXISTS = "exists"
NOT_EXISTS = "!"
EQUALS = "="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"


class SelectorError(ValueError):
    """The selector cannot be used; the message says where and why (one line)."""


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    values: frozenset = frozenset()

    def matches(self, labels):
        present = self.key in labels
        if self.op == EXISTS:
            return present
        if self.op == NOT_EXISTS:
            return not present
        if self.op in (EQUALS, IN):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # != and notin

    def __str__(self):
        if self.op == EXISTS:
            return self.key
        if self.op == NOT_EXISTS:
            return f"!{self.key}"
        if self.op in (EQUALS, NOT_EQUALS):
            return f"{self.key}{self.op}{next(iter(self.values))}"
        return f"{self.key} {self.op} ({','.join(sorted(self.values))})"


def _tokens(text):
    """[(kind, text, position)]: kind is "word", an operator, or "end"."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in _SPECIAL:
            pair = text[i : i + 2]
            if pair in ("==", "!="):
                out.append((pair, pair, i))
                i += 2
            else:
                out.append((char, char, i))
                i += 1
        else:
            start = i
            while i < len(text) and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            out.append(("word", text[start:i], start))
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text):
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def error(self, message, token=None):
        position = (token or self.tokens[self.at])[2]
        return SelectorError(f"node_selector {self.text!r}: {message} at position {position}")

    def peek(self):
        return self.tokens[self.at]

    def take(self):
        token = self.tokens[self.at]
        self.at += 1
        return token

    def requirements(self):
        out = []
        if self.peek()[0] == "end":
            return out
        while True:
            out.append(self.requirement())
            token = self.take()
            if token[0] == "end":
                return out
            if token[0] != ",":
                raise self.error(f"expected ',' or the end, found {token[1]!r}", token)

    def key(self):
        token = self.take()
        if token[0] != "word":
            raise self.error(f"expected a label key, found {token[1] or 'the end'!r}", token)
        _check_key(token[1], lambda message: self.error(message, token))
        return token[1]

    def value(self):
        token = self.peek()
        if token[0] != "word":  # "key=" selects the empty value, as in Kubernetes
            return ""
        self.take()
        if not _VALUE_RE.fullmatch(token[1]):
            raise self.error(
                f"invalid label value {token[1]!r} (at most 63 characters: "
                "letters, digits, '-', '_', '.', starting and ending with a "
                "letter or digit)",
                token,
            )
        return token[1]

    def value_set(self, op):
        token = self.take()
        if token[0] != "(":
            raise self.error(f"expected '(' after {op!r}", token)
        values = []
        while True:
            values.append(self.value())
            token = self.take()
            if token[0] == ")":
                break
            if token[0] != ",":
                raise self.error(
                    f"expected ',' or ')' in the values of {op!r}, found {token[1] or 'the end'!r}",
                    token,
                )
        if values == [""]:
            raise self.error(f"{op!r} needs at least one value", token)
        return frozenset(values)

    def requirement(self):
        if self.peek()[0] == "!":
            self.take()
            return Requirement(self.key(), NOT_EXISTS)
        key = self.key()
        token = self.peek()
        kind = token[0]
        if kind in (",", "end"):
            return Requirement(key, EXISTS)
        self.take()
        if kind in ("=", "==", "!="):
            if self.peek()[0] == "(":
                raise self.error(f"{kind!r} takes one value; use 'in (...)' for a set")
            return Requirement(
                key, NOT_EQUALS if kind == "!=" else EQUALS, frozenset([self.value()])
            )
        if kind == "word" and token[1] in (IN, NOT_IN):
            return Requirement(key, token[1], self.value_set(token[1]))
        if kind in ("<", ">"):
            raise self.error(f"the numeric comparison {kind!r} is not supported", token)
        raise self.error(
            f"expected an operator (=, ==, !=, in, notin) or ',' after {key!r}, found {token[1]!r}",
            token,
        )


def _check_key(key, error):
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        raise error(f"label key {key!r} has an empty prefix")
    if prefix and (len(prefix) > 253 or not _PREFIX_RE.fullmatch(prefix)):
        raise error(f"invalid label key prefix {prefix!r} (a lowercase DNS subdomain)")
    if not _NAME_RE.fullmatch(name):
        raise error(
            f"invalid label key {key!r} (name: at most 63 characters: letters, "
            "digits, '-', '_', '.', starting and ending with a letter or digit)"
        )


class Selector:
    """A parsed NODE_SELECTOR; ``matches(labels)`` when every requirement holds."""

    def __init__(self, text):
        self.text = text or ""
        self.requirements = tuple(_Parser(self.text).requirements())

    def matches(self, labels):
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)
