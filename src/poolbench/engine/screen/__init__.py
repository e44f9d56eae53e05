"""The disk screen (`disks --screen`, docs/screen.md): its fio tests (jobs), the run, the
knee and slow-disk rules (knee, compare), the shared-path check (path), its record (records)
and what a screen says before a study (check)."""
