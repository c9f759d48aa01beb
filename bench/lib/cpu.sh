# bench/lib/cpu.sh: the CPU time the bench scripts (bench/run, bench/peers,
# bench/pgframes) charge to a server, to PostgreSQL and to their own load
# generator, measured the same way in each. Sourced, not run.

# Clock ticks to microseconds.
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))

# pid: the process's user + system time, in ticks (0 once it is gone).
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# The local PostgreSQL cluster's CPU time, in ticks: every process of it, and
# the backends that exited meanwhile (the postmaster's reaped children).
# Empty when no cluster runs here.
pg_ticks() {
    local postmaster total=0 pid
    postmaster=$(pgrep -o -u postgres -x postgres 2>/dev/null) || { echo; return; }
    for pid in $(pgrep -u postgres -x postgres); do total=$(( total + $(proc_ticks "$pid") )); done
    echo $(( total + $(awk '{print $16 + $17}' "/proc/$postmaster/stat" 2>/dev/null || echo 0) ))
}

# Sets CHILDREN_US: user + system time of the calling shell's reaped
# children, in us, through the file TIMES_FILE (call it in that shell, not in
# a $(...) subshell, which has no children).
children_us() {
    times >"$TIMES_FILE"
    CHILDREN_US=$(awk 'NR == 2 { n = split($0, f, " "); t = 0
        for (i = 1; i <= n; i++) { split(f[i], ms, "m"); sub("s", "", ms[2]); t += ms[1] * 60 + ms[2] }
        printf "%.0f", t * 1000000 }' "$TIMES_FILE")
}

# microseconds total, requests: the time per request, rounded; empty when
# either is unknown or there were no requests.
per_request() {
    awk -v t="$1" -v n="$2" 'BEGIN { if (t == "" || n == "" || n + 0 == 0) print ""; else printf "%.0f", t / n }'
}
