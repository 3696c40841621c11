"""Sphinx extension: render an OpenAPI 3.1 document as the REST API reference.

    .. openapi-reference:: openapi.yaml

The argument is the document's path, relative to the page that uses the
directive (or absolute from the source directory when it starts with
``/``). For each tag (in the document's order) a section, and in it, per
path and method: the summary, the description, the microversion range
(``x-openstack: {min-ver, max-ver}``), a table of parameters, the fields of
the request body (one list per microversion branch of an ``anyOf``), and
the responses with their status codes and the error codes an operation
names in ``x-placement-error-codes``.

Descriptions are written in Markdown's inline style: `code` becomes reST
inline literals; the rest of the text is reST-safe as written.
"""

import pathlib
import re

import yaml
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

LOG = logging.getLogger(__name__)
METHODS = ("get", "put", "post", "delete", "patch")
_SINGLE_TICKS = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# Fields of nested objects are listed down to this depth.
MAX_DEPTH = 4


def _rst(text):
    """Markdown-style inline text as reST: paragraphs reflowed onto one line
    each (a literal may span a line break) and single backticks made literals."""
    paragraphs = re.split(r"\n\s*\n", (text or "").strip())
    flowed = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    return _SINGLE_TICKS.sub(lambda m: f"``{m.group(1)}``", flowed)


def _one_line(text):
    return " ".join(_rst(text).split())


def _literal(value):
    text = str(value).replace("`", "'")
    return f"``{text}``" if text else '``""``'


def _versions(obj, default="any"):
    mv = (obj or {}).get("x-openstack") or {}
    low, high = mv.get("min-ver"), mv.get("max-ver")
    if low and high:
        return f"{low} - {high}"
    if low:
        return f"{low} and later"
    if high:
        return f"up to {high}"
    return default


class _Document:
    def __init__(self, data):
        self.data = data
        self.components = data.get("components", {})

    def resolve(self, obj):
        """(name or None, target) of a $ref object, followed to its end."""
        name = None
        while isinstance(obj, dict) and "$ref" in obj:
            ref = obj["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"only local references are supported: {ref}")
            parts = ref[2:].split("/")
            target = self.data
            for part in parts:
                target = target[part]
            name = parts[-1]
            obj = target
        return name, obj

    def type_of(self, schema):
        name, schema = self.resolve(schema)
        if "type" in schema:
            kind = schema["type"]
            kind = " or ".join(kind) if isinstance(kind, list) else kind
        elif "anyOf" in schema or "oneOf" in schema:
            kind = " or ".join(self.type_of(s) for s in schema.get("anyOf", schema.get("oneOf")))
        elif "allOf" in schema:
            kind = "object"
        elif "const" in schema:
            kind = type(schema["const"]).__name__
        else:
            kind = "any"
        if schema.get("format"):
            kind += f" ({schema['format']})"
        return f"{name}: {kind}" if name and name not in ("Uuid", "NullableUuid") else kind

    def constraints(self, schema):
        _name, schema = self.resolve(schema)
        out = []
        if "enum" in schema:
            out.append("one of " + ", ".join(_literal(v) for v in schema["enum"]))
        if "const" in schema:
            out.append("always " + _literal(schema["const"]))
        if "pattern" in schema:
            out.append("pattern " + _literal(schema["pattern"]))
        for key, word in (
            ("minimum", "at least"),
            ("maximum", "at most"),
            ("minLength", "length at least"),
            ("maxLength", "length at most"),
            ("minItems", "items at least"),
            ("maxItems", "items at most"),
            ("minProperties", "keys at least"),
            ("maxProperties", "keys at most"),
        ):
            if key in schema:
                out.append(f"{word} {schema[key]}")
        if schema.get("uniqueItems"):
            out.append("unique items")
        return "; ".join(out)

    def fields(self, schema, prefix="", depth=0):
        """(name, type, required, microversions, description) rows of a schema's fields."""
        _name, schema = self.resolve(schema)
        rows = []
        for part in schema.get("allOf", []):
            rows += self.fields(part, prefix, depth)
        required = set(schema.get("required", []))
        keyed = [(k, v, k in required) for k, v in schema.get("properties", {}).items()]
        keyed += [(f"<{k}>", v, False) for k, v in schema.get("patternProperties", {}).items()]
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            keyed.append(("<key>", extra, False))
        for key, sub, is_required in keyed:
            name = f"{prefix}{key}"
            _subname, target = self.resolve(sub)
            text = " ".join(
                t
                for t in (
                    _one_line(sub.get("description") or target.get("description")),
                    self.constraints(sub),
                )
                if t
            )
            versions = _versions(sub, "") or _versions(target, "")
            rows.append((name, self.type_of(sub), is_required, versions, text))
            if depth + 1 < MAX_DEPTH:
                items = target.get("items") if target.get("type") == "array" else None
                if isinstance(items, dict):
                    rows += self.fields(items, f"{name}[].", depth + 1)
                rows += self.fields(target, f"{name}.", depth + 1)
        return rows


class OpenApiReference(SphinxDirective):
    required_arguments = 1
    has_content = False

    def run(self):
        rel, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        self.env.note_dependency(rel)
        try:
            data = yaml.safe_load(pathlib.Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise self.error(f"openapi-reference: cannot read {rel}: {exc}")
        lines = _Renderer(_Document(data)).render()
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=rel), container)
        return container.children


class _Renderer:
    def __init__(self, doc):
        self.doc = doc
        self.out = []

    def emit(self, *lines):
        self.out.extend(lines)

    def heading(self, text, char):
        self.emit(text, char * max(len(text), 4), "")

    def render(self):
        data = self.doc.data
        by_tag = {}
        for path, item in data.get("paths", {}).items():
            for method in METHODS:
                if method in item:
                    op = item[method]
                    for tag in op.get("tags") or ["other"]:
                        by_tag.setdefault(tag, []).append((path, method, item, op))
        tags = [t["name"] for t in data.get("tags", [])]
        tags += [t for t in by_tag if t not in tags]
        described = {t["name"]: t.get("description", "") for t in data.get("tags", [])}
        for tag in tags:
            if tag not in by_tag:
                continue
            self.heading(tag, "-")
            if described.get(tag):
                self.emit(_rst(described[tag]), "")
            for path, method, item, op in by_tag[tag]:
                self.operation(path, method, item, op)
        return self.out

    def operation(self, path, method, item, op):
        self.heading(f"{method.upper()} {path}", "~")
        self.emit(f"**{_one_line(op.get('summary', ''))}**", "")
        if op.get("description"):
            self.emit(*_rst(op["description"]).splitlines(), "")
        self.emit(f":Microversions: {_versions(op)}")
        if op.get("operationId"):
            self.emit(f":Operation id: {_literal(op['operationId'])}")
        if op.get("security") == []:
            self.emit(":Authentication: none")
        self.emit("")
        params = [self.doc.resolve(p)[1] for p in item.get("parameters", [])]
        params += [self.doc.resolve(p)[1] for p in op.get("parameters", [])]
        if params:
            self.parameters(params)
        if "requestBody" in op:
            self.request_body(op["requestBody"])
        self.responses(op)

    def table(self, title, header, rows, widths):
        self.emit(f".. list-table:: {title}", "   :header-rows: 1", f"   :widths: {widths}", "")
        for row in [header, *rows]:
            first, *rest = row
            self.emit(f"   * - {first or ' '}")
            for cell in rest:
                self.emit(f"     - {cell or ' '}")
        self.emit("")

    def parameters(self, params):
        rows = []
        for p in params:
            schema = p.get("schema", {})
            text = " ".join(
                t for t in (_one_line(p.get("description")), self.doc.constraints(schema)) if t
            )
            if p["in"] == "header" and "enum" in schema:
                text = _one_line(p.get("description"))
            rows.append(
                (
                    _literal(p["name"]),
                    p["in"],
                    self.doc.type_of(schema),
                    "yes" if p.get("required") else "no",
                    _versions(p),
                    text,
                )
            )
        header = ("Name", "In", "Type", "Required", "Microversions", "Description")
        self.table("Parameters", header, rows, "15 8 12 8 12 45")

    def request_body(self, body):
        _name, body = self.doc.resolve(body)
        media = body.get("content", {}).get("application/json", {})
        schema = media.get("schema", {})
        branches = schema.get("anyOf") or schema.get("oneOf") or [schema]
        self.emit(
            "**Request body** (``application/json``, "
            + ("required" if body.get("required") else "optional")
            + ")"
            + (f": {_one_line(body['description'])}" if body.get("description") else ""),
            "",
        )
        for branch in branches:
            name, target = self.doc.resolve(branch)
            versions = _versions(branch, "") or _versions(target)
            title = f"{name or 'Body'} (microversions {versions})"
            if target.get("type") == "array":
                self.emit(f"{title}: an array of {self.doc.type_of(target.get('items', {}))}.", "")
            rows = [
                (_literal(n), t, "yes" if r else "no", v, d)
                for n, t, r, v, d in self.doc.fields(target)
            ]
            if rows:
                header = ("Field", "Type", "Required", "Microversions", "Description")
                self.table(title, header, rows, "25 15 8 12 40")
            source = target.get("x-placement-schema")
            if source:
                self.emit(f"The handler validates it with ``{source}``.", "")

    def responses(self, op):
        codes = op.get("x-placement-error-codes", {})
        rows = []
        for status, response in op.get("responses", {}).items():
            _ref, target = self.doc.resolve(response)
            json_body = target.get("content", {}).get("application/json", {}).get("schema")
            if json_body is None:
                body = "none"
            else:
                body = self.doc.type_of(json_body)
            listed = ", ".join(_literal(c) for c in codes.get(status, []))
            text = _one_line(target.get("description"))
            if listed:
                text += f" Error codes: {listed}."
            versions = _versions(response, "") or _versions(target, "")
            rows.append((f"``{status}``", versions, body, text))
        header = ("Status", "Microversions", "Body", "Description")
        self.table("Responses", header, rows, "8 12 20 60")


def setup(app):
    app.add_directive("openapi-reference", OpenApiReference)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
