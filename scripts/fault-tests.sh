# Sourced by scripts/test, scripts/sanitize and scripts/test-under-load: the fault tests, which
# run alone after the rest of the suite. The kill tests make and serve a few hundred MiB and
# SIGKILL the harness twenty times, the restart test runs two nodes under load; beside the rest
# of the suite they starve its timing tests of the two cores.
fault_tests='HarnessKillTests|PostgresRestartTests'
