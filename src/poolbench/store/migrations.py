"""The result store's schema: every named migration, in order (store/db.py applies them).

A migration is applied once, in the transaction that records its name in
`schema_migrations`; a store holding a name this list does not know was written by a newer
poolbench and is refused (store/opening.py). Append, never edit: a store on disk has run the
text as it was.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,               -- bench | study
            name TEXT,                        -- study name, or the bench target
            status TEXT NOT NULL,             -- running | finished | interrupted | failed
            started_at REAL NOT NULL,
            finished_at REAL,
            argv TEXT NOT NULL,               -- JSON list: the command line
            metadata TEXT NOT NULL,           -- JSON: versions, RAM, target, devices, options
            error TEXT
        );
        CREATE TABLE measurements (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            config TEXT NOT NULL,             -- the configuration measured (bench: the target)
            workload TEXT NOT NULL,
            replicate INTEGER NOT NULL,
            value REAL NOT NULL,
            unit TEXT NOT NULL,
            app_bytes INTEGER NOT NULL,
            ops INTEGER NOT NULL,
            seconds REAL NOT NULL,
            device_bytes INTEGER,             -- NULL when no block device could be counted
            device_mib_s REAL,
            warnings TEXT NOT NULL,           -- JSON list of strings
            guards TEXT NOT NULL,             -- JSON: what each guard did and found
            workload_def TEXT NOT NULL,       -- JSON: the workload definition
            job_file TEXT NOT NULL,           -- the exact fio job run
            created_at REAL NOT NULL,
            UNIQUE (run_id, config, workload, replicate)
        );
        CREATE TABLE commands (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            argv TEXT NOT NULL,
            started_at REAL NOT NULL,
            duration_s REAL NOT NULL,
            returncode INTEGER,
            dry_run INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX measurements_run ON measurements(run_id);
        CREATE INDEX commands_run ON commands(run_id);
        """,
    ),
    (
        "0002_device_overrides",
        """
        CREATE TABLE device_overrides (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            device TEXT NOT NULL,             -- /dev path at claim time
            ident TEXT NOT NULL,              -- the --destroy-data-on value the user gave
            serial TEXT,
            model TEXT,
            size_bytes INTEGER NOT NULL,
            reasons TEXT NOT NULL,            -- JSON list: what was on it, as shown to the user
            confirmed_by TEXT NOT NULL,       -- --yes | interactive
            created_at REAL NOT NULL
        );
        CREATE INDEX device_overrides_run ON device_overrides(run_id);
        """,
    ),
    (
        # Runs measured on many hosts (fleet/), and runs brought in from other stores
        # (store/merge.py). `uid` identifies a run across stores; runs made before it existed
        # get a deterministic one from their start time, so importing the same old store twice
        # is still detected.
        "0003_fleet_hosts",
        """
        ALTER TABLE runs ADD COLUMN uid TEXT;
        UPDATE runs SET uid = 'legacy:' || CAST(started_at * 1000000 AS INTEGER) || ':' || kind
            || ':' || coalesce(name, '') WHERE uid IS NULL;
        CREATE UNIQUE INDEX runs_uid ON runs(uid);
        ALTER TABLE runs ADD COLUMN origin TEXT;  -- JSON: where an imported run came from
        ALTER TABLE measurements ADD COLUMN host TEXT;  -- fleet runs: the host label, else NULL
        CREATE TABLE run_hosts (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            label TEXT NOT NULL,              -- host[:port] as poolbench names it
            address TEXT NOT NULL,
            port INTEGER NOT NULL,
            path TEXT,                        -- the target directory on that host
            server_hostname TEXT,             -- as the fio server reported it
            os TEXT,
            arch TEXT,
            fio_version TEXT,
            clock_skew_s REAL,
            status TEXT NOT NULL,             -- ok | failed
            error TEXT,
            not_applied TEXT NOT NULL,        -- JSON list: guards that could not run there
            UNIQUE (run_id, label)
        );
        CREATE INDEX run_hosts_run ON run_hosts(run_id);
        """,
    ),
    (
        # A trial whose pool step still failed after its retries: kept with its reason so the
        # report can show it and `--resume` can measure it again (engine/trial_loop.py). `resolved`
        # is set once a later attempt measured that (config, replicate) cell.
        "0004_failed_trials",
        """
        CREATE TABLE failed_trials (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            config TEXT NOT NULL,
            replicate INTEGER NOT NULL,
            trial_index INTEGER NOT NULL,
            pool TEXT NOT NULL,               -- the pool name the trial used
            reason TEXT NOT NULL,             -- the error, one paragraph
            resolved INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE INDEX failed_trials_run ON failed_trials(run_id);
        """,
    ),
    (
        # Completion latency per measurement (fio's clat; workloads/fioparse.Latency): the
        # four percentiles the reports use as columns of their own (queryable, NULL where fio
        # timed no completion or the workload is not a fio job), and in `clat` everything
        # fio reported: samples, mean/min/max/stddev, every percentile and the histogram
        # bins (JSON, fioparse.Latency.to_json). Columns on `measurements`, so an imported
        # run (store/merge.py) keeps them. (No SQL comment in an ADD COLUMN: SQLite appends
        # the column text to the CREATE TABLE, where a trailing comment would eat its ")".)
        "0005_latency",
        """
        ALTER TABLE measurements ADD COLUMN clat_p50_ns REAL;
        ALTER TABLE measurements ADD COLUMN clat_p90_ns REAL;
        ALTER TABLE measurements ADD COLUMN clat_p99_ns REAL;
        ALTER TABLE measurements ADD COLUMN clat_p999_ns REAL;
        ALTER TABLE measurements ADD COLUMN clat TEXT
        """,
    ),
    (
        # The configuration's factor levels as data (a JSON object, factor → level), beside
        # the `config` key that names it: a level may hold spaces ('raidz1:3 + log mirror:2'),
        # so the key alone cannot be split back into levels. NULL for a bench run (its
        # configuration is a path) and for rows written before this migration, which the
        # report reads with store.configkey.parse_levels.
        "0006_config_levels",
        """
        ALTER TABLE measurements ADD COLUMN config_levels TEXT
        """,
    ),
    (
        # `poolbench disks --screen`: one row per disk per screen, found again by serial
        # number (a study on the same disks reuses a recent screen, the reports take its
        # figures as the disk speeds). `screen` groups the disks screened together (the
        # slow disk is named against its peers of the same screen); `result` is the disk's
        # whole record (engine/screen/records.py DiskScreen: figures with their replicates,
        # the sustained write's rate over time and knee, zoned, write cache, sectors).
        "0007_disk_screens",
        """
        CREATE TABLE disk_screens (
            id INTEGER PRIMARY KEY,
            screen TEXT NOT NULL,             -- one `disks --screen` invocation
            created_at REAL NOT NULL,
            hostname TEXT NOT NULL,
            device TEXT NOT NULL,             -- /dev/NAME when screened
            serial TEXT,                      -- NULL: the disk reports none (loop devices)
            model TEXT,
            writes INTEGER NOT NULL,          -- 1: the write tests ran
            options TEXT NOT NULL,            -- JSON: runtime, repeats, sustain, interval
            result TEXT NOT NULL              -- JSON: the DiskScreen
        );
        CREATE INDEX disk_screens_serial ON disk_screens(serial);
        """,
    ),
    (
        # How a run was stopped and who runs it. `stopped_by`: the signal that stopped an
        # interrupted run (SIGINT, SIGTERM, SIGHUP), NULL otherwise, and for runs stopped
        # before it existed. `owner`: the process running it, as "BOOT_ID:PID:START" (the
        # kernel's boot id, the pid, the process's start time in clock ticks), so that
        # `poolbench cleanup` can tell a run whose process is gone (kill -9, a crash, a
        # reboot) from one still running, and mark it interrupted; NULL for older runs.
        "0008_run_stops",
        """
        ALTER TABLE runs ADD COLUMN stopped_by TEXT;
        ALTER TABLE runs ADD COLUMN owner TEXT
        """,
    ),
    (
        # What each measurement ran on (records/fingerprint.py): versions, the pool and its
        # properties as read back, each disk's serial and firmware, fill and fragmentation,
        # RAM and ARC. A table of its own, not keys in runs.metadata: one row per bench run
        # (config and replicate NULL) or per study trial (its configuration and replicate),
        # the record as versioned JSON decoded once by Fingerprint.from_text. Stores from
        # before it read as runs without fingerprints.
        "0009_fingerprints",
        """
        CREATE TABLE fingerprints (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            config TEXT,                      -- a study trial's configuration, NULL for bench
            replicate INTEGER,                -- its replicate, NULL for bench
            version INTEGER NOT NULL,         -- Fingerprint.version
            record TEXT NOT NULL,             -- JSON: the Fingerprint
            created_at REAL NOT NULL
        );
        CREATE INDEX fingerprints_run ON fingerprints(run_id);
        """,
    ),
    (
        # `bench PATH --record-as NAME`: the stable name of the series a run belongs to
        # (store/history.py), NULL for a run without one (its series is its target).
        "0010_series",
        """
        ALTER TABLE runs ADD COLUMN series TEXT
        """,
    ),
]

# The percentile columns of 0005_latency: column → the percentile it holds.
CLAT_COLUMNS = {
    "clat_p50_ns": "50",
    "clat_p90_ns": "90",
    "clat_p99_ns": "99",
    "clat_p999_ns": "99.9",
}
