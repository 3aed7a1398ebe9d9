"""A batch of Snapshots written into the history: each GPU reading becomes a packed sample row (``packing``), a
``gpu_limits`` row when its limits changed, and the events its state and throttle reasons imply (``gpu_lost`` /
``gpu_back``, one ``throttle_start`` / ``throttle_end`` pair per episode); the host and process readings become
their rows. ``SnapshotRows`` is what the store remembers between batches for that: the calm stretch of each
open throttle episode and each GPU's limits last written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from desktop.history import codec, limits, packing, rollup
from desktop.history.store_api import StoreApi
from desktop.telemetry.model import THROTTLE_REASONS, ClockEventReason, DeviceState, GpuInfo, GpuReading, Snapshot

#: Seconds without any throttle reason that end a throttle episode.
THROTTLE_END_GAP_S = 30.0


def _throttle_labels(mask: int) -> str:
    return ", ".join(r.label for r in ClockEventReason.decode(mask & int(THROTTLE_REASONS)))


@dataclass(slots=True)
class CachedGpu:
    """One ``gpus`` row as the writer last stored it (it compares each new reading with this)."""

    id: int
    info: GpuInfo
    #: The ``DeviceState`` value stored last.
    state: str
    #: Throttle reasons seen in the open throttle episode (0: no episode open).
    throttle_mask: int


class SnapshotRows:
    """Writes batches of snapshots for one store; not thread-safe (the store's own thread uses it)."""

    def __init__(self) -> None:
        # uuid -> when the current calm stretch of an open throttle episode began.
        self._unthrottled_since: dict[str, float] = {}
        #: Each GPU's limits in force, written when they change (schema v11).
        self._limits = limits.LimitsLog()

    def clear(self) -> None:
        """After a rollback: what is remembered may name rows that were never committed."""
        self._unthrottled_since.clear()
        self._limits.clear()

    def write(self, store: StoreApi, gpus: Mapping[str, CachedGpu], snapshots: Sequence[Snapshot]) -> None:
        """``snapshots`` (at least one) into ``store``, inside the caller's transaction; ``gpus``: the store's
        ``gpus`` rows by UUID, kept up to date by its ``ensure_gpu``."""
        gpu_rows = packing.SampleRows(store.conn)
        host_rows: list[tuple[Any, ...]] = []
        proc_rows: list[tuple[Any, ...]] = []
        seen: dict[int, float] = {}
        self._limits.clear()  # another process (an import) may have written limits since the last batch
        for snap in snapshots:
            ids: dict[int, int] = {}
            for reading in snap.gpus:
                gid = store.ensure_gpu(reading.info, snap.time_s)
                ids[reading.info.index] = gid
                seen[gid] = snap.time_s
                self._limits.note(store.conn, gid, snap.time_s, reading.info)
                uuid = reading.info.uuid
                self._track_state(store, gpus[uuid], snap.time_s, reading)
                if reading.state is DeviceState.OK and reading.sample is not None:
                    gpu_rows.add(gid, snap.time_s, reading.sample)
                    self._track_throttle(store, gpus[uuid], uuid, snap.time_s, reading.sample.clock_event_reasons)
            if snap.host is not None:
                host_rows.append(codec.host_row(snap.time_s, snap.host))
            if snap.processes_fresh:
                ts_ms = codec.to_ms(snap.time_s)
                for proc in snap.processes:
                    gid_or_none = ids.get(proc.gpu_index)
                    if gid_or_none is None:
                        continue
                    proc_rows.append(codec.process_row(ts_ms, gid_or_none, proc, store.string_id(proc.name),
                                                       store.process_string_ids(proc)))
        gpu_rows.write()
        store.conn.executemany(codec.INSERT_HOST, host_rows)
        store.conn.executemany(codec.INSERT_PROC, proc_rows)
        for gid, last in seen.items():
            store.conn.execute("UPDATE gpus SET last_seen_s = max(coalesce(last_seen_s, 0), ?) WHERE id = ?",
                               (last, gid))
        rollup.note_written(store, min(s.time_s for s in snapshots))

    @staticmethod
    def _track_state(store: StoreApi, entry: CachedGpu, time_s: float, reading: GpuReading) -> None:
        uuid, state, detail = reading.info.uuid, reading.state, reading.state_detail
        if entry.state == state.value:
            return
        # Only losing a GPU and getting it back are events; a laptop GPU put to sleep by the
        # driver (runtime PM) and woken again is normal running, not a fault.
        if state is DeviceState.LOST:
            store.add_event(time_s, "gpu_lost", uuid, detail or "")
        elif entry.state == DeviceState.LOST.value:
            store.add_event(time_s, "gpu_back", uuid, detail or "")
        entry.state = state.value
        store.conn.execute("UPDATE gpus SET state = ? WHERE id = ?", (state.value, entry.id))

    def _track_throttle(self, store: StoreApi, entry: CachedGpu, uuid: str, time_s: float,
                        reasons: int | None) -> None:
        """throttle_start / throttle_end events, one pair per episode: an episode ends only after
        ``THROTTLE_END_GAP_S`` without a throttle reason, so a power cap that flickers every few
        seconds is one episode (the end is stamped at the first sample without a reason)."""
        mask = (reasons or 0) & int(THROTTLE_REASONS)
        episode = entry.throttle_mask
        if mask:
            self._unthrottled_since.pop(uuid, None)
            if not episode:
                store.add_event(time_s, "throttle_start", uuid, _throttle_labels(mask))
            if mask | episode != episode:
                entry.throttle_mask = mask | episode
                store.conn.execute("UPDATE gpus SET throttle_mask = ? WHERE id = ?", (entry.throttle_mask, entry.id))
            return
        if not episode:
            return
        since = self._unthrottled_since.setdefault(uuid, time_s)
        if time_s - since >= THROTTLE_END_GAP_S:
            store.add_event(since, "throttle_end", uuid, _throttle_labels(episode))
            del self._unthrottled_since[uuid]
            entry.throttle_mask = 0
            store.conn.execute("UPDATE gpus SET throttle_mask = 0 WHERE id = ?", (entry.id,))
