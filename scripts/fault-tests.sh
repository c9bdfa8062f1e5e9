# Sourced by scripts/test, scripts/sanitize and scripts/test-under-load: the fault tests, which
# run alone after the rest of the suite. The kill tests make and serve a few hundred MiB and
# SIGKILL the harness twenty times, the restart test runs two nodes under load; beside the rest
# of the suite they starve its timing tests of the two cores. The load tests join them: the
# playback flood holds 1,300 connections to a harness process, the key-set load runs a node of its
# own against a trickling host, and each measures a 2 s answer, which it must do unstarved.
# A plain `swift test` skips them (Tests/TestSupport/FaultTests.swift); they run with
# BACKPLANE_FAULT_TESTS=1, which the scripts set for the fault tests' run of their own.
fault_tests='HarnessKillTests|PostgresRestartTests|PlaybackServerGuardLoadTests|UserTokenURLLoadTests'
