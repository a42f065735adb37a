# mpi_env.sh - sourced by every test that starts mpirun: an mpirun for one
# machine that also runs as root (CI containers), with shared-memory
# transport only, ranks that may outnumber cores, and sanitizer settings
# under which Open MPI's own allocations are not reported as ours.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations outlive MPI_Finalize: not ours to report. Its
# components stay loaded at exit, so that LeakSanitizer can name the module
# of a leak (an unloaded one is "<unknown module>", which no rule matches).
# ASan's fast unwinder stops at Open MPI's frames without frame pointers,
# leaving one-frame stacks no rule matches: the slow one walks on to libmpi.
export OMPI_MCA_mca_base_component_disable_dlclose=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
# The table of suppressions used is no report: printed, it would land in
# the sanitizer pass's log folder and fail it.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}print_suppressions=0:suppressions=$(dirname "${BASH_SOURCE[0]}")/lsan_mpi.supp"
MPIRUN=(mpirun --oversubscribe --bind-to none --mca btl self,vader)
