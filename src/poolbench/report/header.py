"""What was measured, on what, and how: the few lines every report starts with (plain text)."""

from __future__ import annotations

from poolbench.records.run_metadata import Device
from poolbench.records.stored_study import StoredDisks
from poolbench.report.data import RunData, fmt_bytes
from poolbench.report.tables import Baseline

COLD_FACTOR = 2.0


def title(run: RunData) -> str:
    what = f"study {run.name}" if run.kind == "study" else f"{run.kind} {run.name}"
    seed = run.metadata.seed
    tail = f", seed {seed}" if seed is not None else ""
    return f"{what} — run {run.id} ({run.status}), started {run.started_text()}{tail}"


def _device(d: Device) -> str:
    parts = [d.model or "unknown model", fmt_bytes(d.size_bytes)]
    ls, ps = d.logical_sector, d.physical_sector
    if ls or ps:
        parts.append(f"{ls}/{ps}-byte sectors")
    if d.rotational is not None:
        parts.append("rotational" if d.rotational else "non-rotational")
    if d.loop_backing_file:
        parts.append(f"loop over {d.loop_backing_file}")
    return f"{d.name} ({', '.join(parts)})"


def lines(run: RunData, baseline: Baseline | None) -> list[tuple[str, str]]:
    """(label, text) pairs; the texts come from the store and are escaped by the renderer."""
    out: list[tuple[str, str]] = []
    if run.study.disks is not None:
        out.append(("disks", _disks(run.study.disks)))
    out += _devices(run)
    out.append(("versions", _versions(run)))
    cells = [run.cell(c, w) for c in run.configs for w in run.workloads]
    if cells and all(c is not None and c.exact for c in cells):
        # Nothing was read or written: no working set, data, cache or replicate rule applies.
        out.append(("figures", "read from each pool after it was built (no I/O); where every "
                    "build agrees, changes are exact, with no interval"))  # fmt: skip
        if run.error:
            out.append(("error", str(run.error)))
        return out
    ws = _working_set(run)
    if ws is not None:
        out.append(("working set", ws))
    data = _data(run)
    if data is not None:
        out.append(("data", data))
    out += _md_resync(run)
    st = run.study
    if st.present:
        out.append(
            (
                "replicates",
                f"{st.replicates}–{st.max_replicates} per configuration, each on "
                f"a freshly built pool, until the 95% CI is within ±{st.ci_target}% of "
                "the mean; trials interleaved in random order",
            )
        )
    fixed = run.fixed_levels()
    if fixed and len(run.configs) > 1:
        out.append(("every configuration", " ".join(f"{k}={v}" for k, v in fixed.items())))
    if baseline is not None:
        out.append(
            (
                "comparison",
                f"change vs {baseline.label}: ratio of means with its 95% Fieller interval "
                '(Welch df), Holm-corrected within each workload; "no significant difference"'
                " when the interval includes no change",
            )
        )
    if run.error:
        out.append(("error", str(run.error)))
    scales = run.metadata.time_limit_scales  # system/watchdog.py, when not all 1
    if scales:
        each = ", ".join(f"× {x:g}" for x in scales)
        out.append(("time limits", f"{each} (POOLBENCH_TIME_LIMIT_SCALE, one per invocation)"))
    return out


def _devices(run: RunData) -> list[tuple[str, str]]:
    """The devices measured, whether --no-screen left them unscreened, the bench target."""
    out = []
    meta = run.metadata
    if meta.devices:
        out.append(("devices", "; ".join(_device(d) for d in meta.devices)))
    if meta.not_screened is not None:  # --no-screen (engine/screen/check.py)
        out.append(("disk screen", f"warning: {meta.not_screened}"))
    if meta.target_path:
        out.append(("target", f"{meta.target_path} ({meta.target_how})".strip()))
    return out


def _disks(disks: StoredDisks) -> str:
    if disks.source == "devices":
        on = f"{len(disks.devices)} devices: " + ", ".join(disks.devices)
    else:
        capped = f" capped at {disks.cap:g} MiB/s each" if disks.cap is not None else ""
        on = (
            f"{disks.count} {disks.source} disks of {disks.size}{capped} "
            "(sparse files on this machine's own disk: the figures show the method and the "
            "relative cost of each layout, not your hardware)"
        )
    vs = disks.vdev_source
    if vs and vs != "whole":
        on += f"; vdev source {vs}"
    return on


def _versions(run: RunData) -> str:
    """poolbench, fio, kernel and backend versions, and the host they ran on."""
    machine = run.metadata.machine
    versions = [f"poolbench {machine.poolbench_version or '?'}"]
    versions += [str(v) for v in run.fio_versions()] or ["fio ?"]
    if machine.kernel:
        versions.append(machine.kernel)
    versions += [b.text() for b in run.metadata.backends]
    host = f" on {machine.hostname}" if machine.hostname else ""
    return ", ".join(versions) + host


def _working_set(run: RunData) -> str | None:
    ws, ram = run.working_set_bytes(), run.ram_bytes()
    if ws is None:
        return None
    text = f"{fmt_bytes(ws)} per configuration"
    if ram:
        ratio = ws / ram
        text += f" = {ratio:.2f}× RAM ({fmt_bytes(ram)})"
        if ratio < COLD_FACTOR:
            text += (
                f" — below the {COLD_FACTOR:.0f}× rule: cold reads rely on the cache drop,"
                " whose verification each figure records"
            )
    return text


def _data(run: RunData) -> str | None:
    comp = run.compressibility()
    if comp is None:
        return None
    text = f"{comp}% compressible, fresh random buffers per write (never zeros)"
    if any(c.workload_kind == "untar" for c in run.cells.values()):
        # untar writes the tarball's own files, whatever --compressibility says
        text += " (fio's data; untar writes the source tree's files, which compress 2-4×)"
    ratios = sorted(
        {
            str(c.pool().get("compressratio"))
            for c in run.cells.values()
            if c.pool().get("compressratio") is not None
        }
    )
    if ratios:
        text += f"; achieved compressratio {', '.join(ratios)}"
    return text


def _md_resync(run: RunData) -> list[tuple[str, str]]:
    """md's initial resync per configuration: a figure of its own (ZFS and btrfs need none),
    and whether any measurement ran while it was going on."""
    seen: dict[str, str] = {}
    for (config, _w), c in sorted(run.cells.items()):
        r = c.pool().get("initial_resync")
        if not isinstance(r, dict) or config in seen:
            continue
        text = str(r.get("mode"))
        if r.get("seconds") is not None:
            text = f"{float(r['seconds']):.1f} s for {fmt_bytes(r.get('member_bytes'))} per member"
            if r.get("mib_per_s"):
                text += f" ({r['mib_per_s']} MiB/s)"
            text += ", " + str(r.get("mode"))
        during = r.get("measured_during_resync")
        text += "; measurements ran during it" if during else "; no measurement ran during it"
        seen[config] = text
    if not seen:
        return []
    return [("md initial resync", "; ".join(f"{k}: {v}" for k, v in seen.items()))]
