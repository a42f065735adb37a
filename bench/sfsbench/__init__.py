"""sfsbench - spritefs-bench, the storage-versus-training bench (standard library only).

  cli.py            options, environment, subcommands (demo, larger, accelerators, report)
  core.py           the Bench: records, notes, programs, the workspace, `with mounted(...)`
  standard.py       the comparison scenario (fashion-mnist, large, photos, --data)
  sweeps.py         its sweeps, data-parallel runs and PyTorch training peers
  larger.py         --dataset larger: data several times the cache budget
  accel.py          --dataset accelerators: emulated accelerators held at AU >= 90% per medium
  report.py         results.json, report.md and the tables of the comparison
  report_larger.py, accel_report.py  the same for --dataset larger and accelerators
  rutil.py, plots.py  the report's helpers and gnuplot plots
  demo.py           `spritefs-bench demo` (./run demo)
"""
