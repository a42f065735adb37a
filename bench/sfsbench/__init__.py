"""sfsbench - spritefs-bench, the storage-versus-training bench (standard library only).

  cli.py            options, environment, subcommands (demo, larger, report)
  core.py           the Bench: records, notes, programs, the workspace, `with mounted(...)`
  standard.py       the comparison scenario (fashion-mnist, large, photos, --data)
  sweeps.py         its sweeps, data-parallel runs and PyTorch training peers
  larger.py         --dataset larger: data several times the cache budget
  report.py         results.json, report.md and the tables of the comparison
  report_larger.py  the same for --dataset larger
  rutil.py, plots.py  the report's helpers and gnuplot plots
  demo.py           `spritefs-bench demo` (./run demo)
"""
