# Sourced by .ci/run and every leg: downloads survive a flaky network. CI's installs fetch from PyPI (and apt);
# one interrupted download used to fail a leg that tests nothing about the network (stop 37: "incomplete-download"
# of a scipy wheel failed four legs within a minute). pip retries each connection and resumes a cut download
# (the PIP_* settings; a pip too old to know one ignores it), and with_retries reruns a whole install a few
# times, waiting longer each time. An install that still fails fails its leg, as before: nothing is skipped.
export PIP_RETRIES="${PIP_RETRIES:-10}" PIP_TIMEOUT="${PIP_TIMEOUT:-60}" PIP_RESUME_RETRIES="${PIP_RESUME_RETRIES:-10}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

with_retries() {   # command... : run it up to 4 times, 20 s, 60 s and 120 s apart; its last exit code
    local attempt code=0 wait
    for attempt in 1 2 3 4; do
        "$@" && return 0
        code=$?
        [ "$attempt" -eq 4 ] && break
        wait=$(( attempt == 1 ? 20 : attempt == 2 ? 60 : 120 ))
        echo "ci: attempt $attempt of 4 failed (exit $code): $*; retrying in $wait s" >&2
        sleep "$wait"
    done
    return "$code"
}
