"""Build requests in placement, as the conductors use them: held under leases.

A conductor only acts on a record it holds. ``take`` is placement's
compare-and-set on the generation the conductor read; ``finish`` is guarded
by the owner, so a conductor whose lease ran out and was taken over cannot
finish what is no longer its own.

Calls go in bulk (issue 12): what the threads of one conductor take, hand
off, finish or create at about the same time is sent as one request of
placement's bulk forms (``conductor.batch``: a few milliseconds' window,
and whatever queued while a request was in flight). Those forms are all or
none; placement names every record it refused (one error object per
record, with its ``instance_uuid``), so a record that is no longer ours is
answered "lost" to its own caller and the others are sent again without it:
a lost compare-and-set never applies, and never blocks, the rest.
"""

import collections
import logging

from conductor import batch as batch_mod
from joule import placement_client as client_mod

LOG = logging.getLogger(__name__)

DUPLICATE = "placement.build_request.duplicate"
LEASED = "placement.build_request.leased"
FINISHED = "placement.build_request.invalid_transition"
CONCURRENT = "placement.concurrent_update"
# Conflicts that mean "not yours (any more)": somebody else holds, took or
# finished it.
LOST = (LEASED, FINISHED, CONCURRENT)
# What a call to placement raises when it failed or went unanswered: the
# conductor logs it and leaves the records it concerned held, for the sweep
# to finish once their lease runs out.
PLACEMENT_ERRORS = (client_mod.PlacementError, client_mod.PlacementUnreachable)
# Request ids per read-back listing (placement's request_id=in: limit).
READ_BACK_IDS = 100
# One finish of finish_many: the last two may be left out.
_Finish = collections.namedtuple(
    "_Finish",
    "instance_uuid status host_uuid reason build_succeeded generation",
    defaults=(False, None),
)


class AlreadyRecorded(Exception):
    """The request's instances have build requests already (a redelivery)."""


class Records:
    def __init__(self, client, owner, lease_seconds, window=0.0, max_items=500, company=None):
        self.client = client
        self.owner = owner
        self.lease_seconds = lease_seconds

        def batcher(flush, kind):
            return batch_mod.Batcher(flush, window, max_items, company, kind)

        self.max_items = max_items
        # A create carries whole requests (each its instances' specs); the
        # requests of one flush go in bodies of at most max_items records.
        self._creates = batcher(self._create_chunked, "create")
        self._takes = batcher(lambda items: self._take_bulk(items, False), "take")
        self._hand_offs = batcher(lambda items: self._take_bulk(items, True), "hand_off")
        self._finishes = batcher(self._finish_bulk, "finish")

    def batchers(self):
        return {
            "create": self._creates,
            "take": self._takes,
            "hand_off": self._hand_offs,
            "finish": self._finishes,
        }

    def create_held(self, items):
        """Record pending build requests held by this owner, all or none.

        The records of several requests (several callers) go in one bulk
        create; a request some of whose instances are recorded already is
        refused alone (AlreadyRecorded) and the others are sent again.

        :return: {instance_uuid: generation}.
        :raise AlreadyRecorded: some instance is recorded already.
        """
        return self._creates.submit(list(items))

    def _create_once(self, items):
        try:
            return self._post_create(items)
        except client_mod.PlacementUnreachable:
            # The answer was lost, not necessarily the write (all or none):
            # records of ours that are there were created by it.
            ours = self._read_back(items)
            if ours is not None:
                LOG.info("create of %d build request(s) answered by reading them back", len(items))
                return ours
            # Not written (or not all ours: then placement says whose, 409).
            return self._post_create(items)

    def _post_create(self, items):
        resp = self.client.request(
            "POST",
            "/build_requests",
            json={
                "build_requests": items,
                "owner": self.owner,
                "lease_seconds": self.lease_seconds,
            },
            ok=(201,),
        )
        return {r["instance_uuid"]: r["generation"] for r in resp.json()["build_requests"]}

    def _read_back(self, items):
        """{instance_uuid: generation} when every record of ``items`` is in
        placement as this create left it (pending, held by this owner, never
        taken since: generation 0); None otherwise. A record of ours that
        moved on is from an earlier handling of the same request (a
        redelivery), not this create's: it is not taken as created."""
        wanted = {r["instance_uuid"] for r in items}
        request_ids = sorted({r["request_id"] for r in items})
        ours = {}
        for start in range(0, len(request_ids), READ_BACK_IDS):
            chunk = request_ids[start : start + READ_BACK_IDS]
            for record in self.client.list_build_requests(request_id="in:" + ",".join(chunk)):
                if (
                    record["instance_uuid"] in wanted
                    and record.get("owner") == self.owner
                    and record.get("status") == "pending"
                    and record.get("generation") == 0
                ):
                    ours[record["instance_uuid"]] = record["generation"]
        return ours if len(ours) == len(wanted) else None

    def _create_chunked(self, groups):
        """Whole requests, in bodies of at most ``max_items`` records (a
        bigger request alone in its body, as it always was)."""
        results, chunk, size = [], [], 0
        for group in groups:
            if chunk and size + len(group) > self.max_items:
                results.extend(self._create_groups(chunk))
                chunk, size = [], 0
            chunk.append(group)
            size += len(group)
        if chunk:
            results.extend(self._create_groups(chunk))
        return results

    def _create_groups(self, groups):
        """Create ``groups`` (each a request's records) in as few bodies as
        placement takes: a body names each instance once, so a request whose
        instances another group of the flush already names (a redelivery in
        hand at the same moment as its first delivery) goes in a later body,
        where placement refuses it as a duplicate, alone; the body it would
        have broken (400, then one create per request) is not sent."""
        rounds, names = [], []
        for index, group in enumerate(groups):
            uuids = {r["instance_uuid"] for r in group}
            for number, used in enumerate(names):
                if not used & uuids:
                    used |= uuids
                    rounds[number].append(index)
                    break
            else:
                names.append(set(uuids))
                rounds.append([index])
        if len(rounds) == 1:
            return self._create_round(groups)
        results = [None] * len(groups)
        for round_ in rounds:
            try:
                made = self._create_round([groups[i] for i in round_])
            except client_mod.PlacementError as exc:
                # This body's requests get the error; the other bodies stand.
                made = [exc] * len(round_)
            for index, result in zip(round_, made, strict=True):
                results[index] = result
        return results

    def _create_round(self, groups):
        results = [None] * len(groups)
        todo = list(range(len(groups)))
        while todo:
            try:
                made = self._create_once([r for i in todo for r in groups[i]])
            except client_mod.PlacementError as exc:
                if exc.status == 409 and exc.code == DUPLICATE:
                    known = set(exc.instances())
                    refused = [i for i in todo if known & {r["instance_uuid"] for r in groups[i]}]
                    if len(todo) == 1 or not refused:
                        refused = todo  # all of it, or cannot tell whose
                    for i in refused:
                        results[i] = AlreadyRecorded(exc.detail)
                    todo = [i for i in todo if i not in refused]
                    continue
                if exc.status == 400 and len(todo) > 1:
                    # One request's records are refused: find out whose, alone.
                    for i in todo:
                        try:
                            results[i] = self._create_round([groups[i]])[0]
                        except client_mod.PlacementError as alone:
                            results[i] = alone
                    return results
                raise
            for i in todo:
                results[i] = {r["instance_uuid"]: made[r["instance_uuid"]] for r in groups[i]}
            break
        return results

    def get(self, instance_uuid):
        """The record, or None when there is none."""
        try:
            return self.client.request("GET", f"/build_requests/{instance_uuid}", ok=(200,)).json()
        except client_mod.PlacementError as exc:
            if exc.status == 404:
                return None
            raise

    def take(self, instance_uuid, generation, hand_off=False, holder=None):
        """Take (or renew, or hand off) the record; its new generation, or None
        when it is not this conductor's to take (held, taken, finished).
        ``holder``: the owner that left it to this one at ``generation``
        without handing it off (its live lease does not refuse the take)."""
        return self.take_many({instance_uuid: generation}, hand_off, {instance_uuid: holder})[
            instance_uuid
        ]

    def take_many(self, generations, hand_off=False, holders=None):
        """``take`` for {instance_uuid: generation} (and {instance_uuid:
        holder} of those left by a holder); {instance_uuid: new generation,
        or None when lost}."""
        batcher = self._hand_offs if hand_off else self._takes
        holders = holders or {}
        items = [(i, g, holders.get(i)) for i, g in generations.items()]
        return dict(zip(generations, batcher.submit_many(items), strict=True))

    def _take_bulk(self, pairs, hand_off):
        """One PUT /build_requests/leases per round for (instance, generation,
        holder) items; the lost ones are answered None and the others sent
        again."""
        results = [None] * len(pairs)
        for round_ in batch_mod.unique_rounds(p[0] for p in pairs):
            todo = round_
            while todo:
                body = {
                    "build_requests": [_lease_item(*pairs[i]) for i in todo],
                    "owner": self.owner,
                    "lease_seconds": self.lease_seconds,
                    "hand_off": hand_off,
                }
                try:
                    resp = self.client.request(
                        "PUT", "/build_requests/leases", json=body, ok=(200,), retry=False
                    )
                except client_mod.PlacementError as exc:
                    todo = self._refused(exc, [pairs[i][0] for i in todo], todo, results)
                    continue
                gens = {r["instance_uuid"]: r["generation"] for r in resp.json()["build_requests"]}
                for i in todo:
                    results[i] = gens[pairs[i][0]]
                break
        return results

    def _refused(self, exc, uuids, todo, results):
        """Answer the records a bulk call refused (None when lost, else the
        error); return the positions to send again. Raise when the error
        names none of them (it is about the whole call)."""
        if exc.status not in (404, 409):
            raise exc
        named = {}
        for item in exc.items:
            for uuid in [item.get("instance_uuid"), *(item.get("instance_uuids") or ())]:
                if uuid:
                    named[uuid] = item.get("code")
        hit = [k for k, u in zip(todo, uuids, strict=True) if u in named]
        if not hit:
            raise exc
        for k, u in zip(todo, uuids, strict=True):
            if u in named:
                results[k] = None if named[u] in LOST else exc
        return [k for k in todo if k not in hit]

    def finish(
        self,
        instance_uuid,
        status,
        host_uuid=None,
        reason=None,
        build_succeeded=False,
        generation=None,
    ):
        """Finish a record this conductor holds; False when it no longer does.
        ``build_succeeded``: placed after a successful build on the host,
        which placement counts as that host's build outcome too.
        ``generation``: only at the generation this conductor holds it at
        (a takeover since, even by this process's own sweep, refuses it)."""
        item = (instance_uuid, status, host_uuid, reason, build_succeeded, generation)
        return self.finish_many([item])[0]

    def finish_many(self, finishes):
        """``finish`` for (instance_uuid, status, host_uuid, reason[,
        build_succeeded[, generation]]) tuples; one bool each, False for a
        record that is no longer ours."""
        items = []
        for f in (_Finish(*finish) for finish in finishes):
            item = {"instance_uuid": f.instance_uuid, "status": f.status, "host_uuid": f.host_uuid}
            item["owner"] = self.owner
            if f.reason is not None:
                item["reason"] = f.reason[:60000]
            if f.build_succeeded:
                item["build_succeeded"] = True
            if f.generation is not None:
                item["generation"] = f.generation
            items.append(item)
        done = self._finishes.submit_many(items)
        for item, ok in zip(items, done, strict=True):
            if not ok:
                LOG.warning(
                    "build request %s not finished as %s: no longer ours",
                    item["instance_uuid"],
                    item["status"],
                )
        return done

    def _finish_bulk(self, items):
        results = [None] * len(items)
        for round_ in batch_mod.unique_rounds(i["instance_uuid"] for i in items):
            todo = round_
            while todo:
                try:
                    self.client.request(
                        "PUT",
                        "/build_requests",
                        json={"build_requests": [items[i] for i in todo]},
                        ok=(200,),
                        retry=True,
                    )
                except client_mod.PlacementError as exc:
                    todo = self._refused(
                        exc, [items[i]["instance_uuid"] for i in todo], todo, results
                    )
                    continue
                for i in todo:
                    results[i] = True
                break
        return [False if r is None else r for r in results]

    def expired(self, limit):
        """Pending records nobody holds any more (their conductor died)."""
        return self.client.request(
            "GET",
            "/build_requests",
            params={"status": "pending", "lease_expired": "true", "limit": str(limit)},
            ok=(200,),
        ).json()["build_requests"]

    def of_request(self, request_id):
        return self.of_requests([request_id])

    def of_requests(self, request_ids):
        """The records of these requests (at most 100 ids): one read while they
        fit one page of the listing, its next pages after that."""
        value = request_ids[0] if len(request_ids) == 1 else "in:" + ",".join(request_ids)
        return self.client.all_pages("build_requests", "build_requests", {"request_id": value})


def _lease_item(instance_uuid, generation, holder):
    item = {"instance_uuid": instance_uuid, "generation": generation}
    if holder is not None:
        item["holder"] = holder
    return item
