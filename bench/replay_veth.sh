# bench/replay_veth.sh - sourced by the replay benchmarks (budget_replay.sh, step3_replay.sh): the
# wire they replay onto, two namespaces $A and $B joined by a 9000-byte veth pair $VA-$VB with IPv6
# off, and its removal on exit with the capture $CAP_PID (stopped by SIGINT) and the directory $WORK.
CAP_PID=
cleanup() {
    [[ -n $CAP_PID ]] && kill -INT "$CAP_PID" 2>/dev/null && wait "$CAP_PID" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
veth_up() {
    ip netns add "$A"
    ip netns add "$B"
    ip link add "$VA" netns "$A" mtu 9000 type veth peer name "$VB" netns "$B" mtu 9000
    for p in "$A:$VA" "$B:$VB"; do
        ip netns exec "${p%%:*}" sysctl -q -w "net.ipv6.conf.${p#*:}.disable_ipv6=1"
        ip -n "${p%%:*}" link set "${p#*:}" up
    done
}
HZ=$(getconf CLK_TCK)
# CPU of a process and all its threads (utime + stime), in ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
