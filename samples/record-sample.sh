#!/bin/bash
# record-sample.sh - record samples/sample.pcap.gz, wirelog's demo capture of real traffic.
#
# Run as root on Debian/Ubuntu:   sudo samples/record-sample.sh
# Writes samples/sample.pcap.gz and samples/sample.txt (what is in the capture, taken from
# the tools' own outputs). Nothing leaves the machine: every server and client runs in a
# private network namespace ($NS) and talks only to loopback addresses there; tcpdump
# captures that namespace's lo, so the capture holds only this script's traffic. lo's MTU
# is set to 1500 in the namespace, and its segmentation offloads turned off, so that TCP
# segments are Ethernet-sized (MSS 1460) as on a real network.
#
# Content (about 10 s of traffic):
#   HTTP   nginx on 127.0.0.1:80 and [::1]:80 serving fixed files to curl: 4 requests on one
#          keep-alive connection (HTML, CSS, a ~50 KB JSON file, a 404), 2 requests with
#          "Connection: close", a HEAD, a POST, 2 requests on one IPv6 connection, and a
#          download that curl reads slowly (--limit-rate) and aborts after 2 s (--max-time):
#          it closes with unread data in its socket buffer, so the connection ends with a RST
#   DNS    dnsmasq on 127.0.0.53 and ::1 answering from a hosts file and --host-record/
#          --mx-host: dig over UDP (A, AAAA, MX, NXDOMAIN) on IPv4 and IPv6, one over TCP
#   SQL    MariaDB on 127.0.0.1:3306, mariadb client over TCP: a session that logs in and
#          runs CREATE TABLE / INSERT / SELECT / a failing SELECT / ..., and a login with a
#          wrong password
#   refused TCP connects to closed ports on 127.0.0.1 and ::1 (SYN -> RST), one UDP
#          datagram to a closed port on each (ICMP / ICMPv6 port unreachable)
#   ICMP   ping -c 3 to 127.0.0.1 and to ::1
set -euo pipefail

NS=${NS:-wl_sample}
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
OUT_DIR=${OUT_DIR:-$HERE}
export DEBIAN_FRONTEND=noninteractive LC_ALL=C TZ=UTC

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, tcpdump, servers)"

# ---- packages ------------------------------------------------------------------------------
PKGS=(nginx dnsmasq-base dnsutils curl mariadb-server mariadb-client tcpdump tshark
      wireshark-common iproute2 iputils-ping ethtool gzip tcpreplay)
install_pkgs() {
    local missing=() p own_policy=0
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    log "installing: ${missing[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    # keep the packages' own daemons (nginx, mariadb) from being started on the host
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1
    fi
    local rc=0
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=1
    ((own_policy)) && rm -f /usr/sbin/policy-rc.d
    return $rc
}
install_pkgs "${PKGS[@]}" || die "package installation failed"

# ---- bookkeeping: every PID we start, the namespace, the temp dir ---------------------------
PIDS=()
NS_CREATED=0
T=$(mktemp -d /tmp/wl_sample.XXXXXX)
chmod 755 "$T"
cleanup() {
    local rc=$? pid i
    set +e
    for ((i=${#PIDS[@]}-1; i>=0; i--)); do
        pid=${PIDS[i]}
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        fi
    done
    wait 2>/dev/null
    ((NS_CREATED)) && ip netns del "$NS" 2>/dev/null
    rm -rf "$T"
    return $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ip netns list | awk '{print $1}' | grep -qx "$NS"; then
    die "network namespace $NS already exists (delete it with 'ip netns del $NS' or set NS=...)"
fi
ip netns add "$NS"; NS_CREATED=1
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
# Ethernet-sized packets: with lo's default 64 KiB MTU, and with segmentation offload (the
# capture sees the unsegmented "super-packets"), a 50 KB response would be one or two packets
nsx ip link set lo mtu 1500
nsx ethtool -K lo tso off gso off gro off 2>/dev/null || log "warning: could not turn off segmentation offload on lo"
# bg CMD...: start CMD in the namespace in the background; `ip netns exec` execs the
# command, so $! is the server's own PID
bg() { ip netns exec "$NS" "$@" & PIDS+=("$!"); LAST_PID=$!; }
# wait_for SECONDS CMD...: retry CMD every 0.2 s, bounded
wait_for() {
    local n=$(( $1 * 5 )); shift
    for ((k=0; k<n; k++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    return 1
}

# ---- fixed content -------------------------------------------------------------------------
mkdir -p "$T/www/data" "$T/www/slow" "$T/out"
cat >"$T/www/index.html" <<'EOF'
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>wirelog demo</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<h1>wirelog demo server</h1>
<p>This page is served by nginx inside a private network namespace.
It exists so that wirelog's sample capture has some real HTTP in it.</p>
<ul>
<li><a href="/data/catalog.json">catalog.json</a> (about 50 KB)</li>
<li><a href="/slow/firmware.bin">firmware.bin</a> (rate limited)</li>
</ul>
</body>
</html>
EOF
cat >"$T/www/style.css" <<'EOF'
body { font-family: sans-serif; margin: 2em auto; max-width: 40em; color: #222; }
h1 { font-size: 1.4em; border-bottom: 1px solid #ccc; }
a { color: #0645ad; }
EOF
# ~50 KB of JSON and a 512 KB blob from a fixed Park-Miller generator (exact in any awk)
awk 'BEGIN {
    x = 20240601; hosts[0] = "www"; hosts[1] = "db"; hosts[2] = "mail"; hosts[3] = "cache"
    printf "{\"generated_by\":\"wirelog record-sample.sh\",\"items\":[\n"
    for (i = 1; i <= 530; i++) {
        x = (x * 16807) % 2147483647; a = x
        x = (x * 16807) % 2147483647; b = x
        printf "  {\"id\":%d,\"host\":\"%s%d.demo.test\",\"port\":%d,\"rtt_us\":%d,\"token\":\"%08x%08x\"}%s\n",
               i, hosts[a % 4], a % 97, 1024 + b % 60000, a % 250000, a, b, (i < 530 ? "," : "")
    }
    printf "]}\n"
}' >"$T/www/data/catalog.json"
awk 'BEGIN {
    x = 4242; line = ""
    for (i = 0; i < 8192; i++) {          # 8192 lines x 64 bytes = 512 KiB
        s = ""
        for (j = 0; j < 7; j++) { x = (x * 16807) % 2147483647; s = s sprintf("%09d", x % 1000000000) }
        printf "%s\n", substr(s, 1, 63)
    }
}' >"$T/www/slow/firmware.bin"
touch -d '2024-06-01 12:00:00 UTC' "$T"/www/*.* "$T"/www/*/*

cat >"$T/hosts" <<'EOF'
# answer data only (documentation ranges): nothing is ever sent to these addresses
192.0.2.10    www.demo.test
2001:db8::10  www.demo.test
192.0.2.20    db.demo.test
192.0.2.30    cache.demo.test
EOF

# ---- servers ---------------------------------------------------------------------------------
log "starting nginx, dnsmasq, MariaDB in netns $NS"
mkdir -p "$T/nginx-tmp"
cat >"$T/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
user root root;
pid $T/nginx.pid;
error_log $T/nginx-error.log info;
events { worker_connections 64; }
http {
    types { text/html html; text/css css; application/json json; application/octet-stream bin; }
    default_type application/octet-stream;
    log_format probe '\$remote_addr "\$request" \$status \$body_bytes_sent conn=\$connection req=\$connection_requests';
    access_log $T/access.log probe;
    server_tokens off;
    sendfile on;
    keepalive_timeout 30s;
    client_body_temp_path $T/nginx-tmp/body;
    proxy_temp_path $T/nginx-tmp/proxy;
    fastcgi_temp_path $T/nginx-tmp/fastcgi;
    uwsgi_temp_path $T/nginx-tmp/uwsgi;
    scgi_temp_path $T/nginx-tmp/scgi;
    server {
        listen 127.0.0.1:80;
        listen [::1]:80;
        server_name www.demo.test;
        root $T/www;
        location = /api/report {
            default_type application/json;
            return 201 '{"status":"stored"}\n';
        }
        location /slow/ {
            limit_rate 32k;
        }
    }
}
EOF
nsx nginx -t -q -e "$T/nginx-error.log" -p "$T" -c "$T/nginx.conf" || { cat "$T/nginx-error.log" >&2; die "bad nginx config"; }
bg nginx -e "$T/nginx-error.log" -p "$T" -c "$T/nginx.conf"
NGINX_PID=$LAST_PID

bg dnsmasq -k --user=root --conf-file=/dev/null --no-resolv --no-hosts --addn-hosts="$T/hosts" \
    --listen-address=127.0.0.53 --listen-address=::1 --bind-interfaces --port=53 \
    --local=/demo.test/ --domain-needed --cache-size=100 --pid-file="$T/dnsmasq.pid" \
    --host-record=mail.demo.test,192.0.2.25,2001:db8::25 --mx-host=demo.test,mail.demo.test,10 \
    --log-queries --log-facility="$T/dnsmasq.log"
DNSMASQ_PID=$LAST_PID

DB=$T/mysql
MYSQL_SOCK=$T/mysql.sock
mkdir -p "$DB"
mariadb-install-db --no-defaults --user=root --datadir="$DB" --auth-root-authentication-method=socket \
    --innodb-log-file-size=16M >"$T/mysql-install.log" 2>&1 || { cat "$T/mysql-install.log" >&2; die "mariadb-install-db failed"; }
bg mariadbd --no-defaults --user=root --datadir="$DB" --socket="$MYSQL_SOCK" --port=3306 \
    --bind-address=127.0.0.1 --pid-file="$T/mysql.pid" --log-error="$T/mysql.err" \
    --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=32M --innodb-log-file-size=16M
MYSQL_PID=$LAST_PID
ok=0
for _ in $(seq 1 120); do
    nsx mariadb-admin --no-defaults -uroot --socket="$MYSQL_SOCK" ping >/dev/null 2>&1 && { ok=1; break; }
    kill -0 "$MYSQL_PID" 2>/dev/null || break
    sleep 0.5
done
((ok)) || { cat "$T/mysql.err" >&2; die "mariadbd did not come up"; }
# setup over the unix socket, before the capture starts
nsx mariadb --no-defaults -uroot --socket="$MYSQL_SOCK" -e "
    CREATE DATABASE demo;
    CREATE USER 'demo'@'127.0.0.1' IDENTIFIED BY 'demo-pass';
    GRANT ALL ON demo.* TO 'demo'@'127.0.0.1';"

# readiness (not captured): nginx on both addresses, dnsmasq on both, MariaDB on TCP
wait_for 10 nsx curl -sf -o /dev/null http://127.0.0.1/index.html || die "nginx (v4) not answering"
wait_for 10 nsx curl -sf -g -o /dev/null 'http://[::1]/index.html' || die "nginx (v6) not answering"
wait_for 10 nsx dig +short +tries=1 +time=1 @127.0.0.53 www.demo.test A || die "dnsmasq (v4) not answering"
wait_for 10 nsx dig +short +tries=1 +time=1 @::1 www.demo.test A || die "dnsmasq (v6) not answering"
wait_for 10 nsx mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P 3306 -udemo -pdemo-pass --skip-ssl -e 'SELECT 1' \
    || die "MariaDB not answering on 127.0.0.1:3306"
: >"$T/access.log"      # the access log counts only captured requests
sleep 0.5

# ---- capture ---------------------------------------------------------------------------------
PCAP=$T/sample.pcap
DNSMASQ_LOG0=$(wc -l <"$T/dnsmasq.log")
# ip netns exec directly (not the nsx function), so that $! is tcpdump's own PID.
# --immediate-mode: without it libpcap hands packets over in blocks (up to 1 s late), and
# the packets still in the kernel's ring when tcpdump gets SIGINT are lost.
ip netns exec "$NS" tcpdump -i lo -n -Z root -s 0 -B 8192 --immediate-mode -U -w "$PCAP" 2>"$T/tcpdump.log" &
CAP_PID=$!; PIDS+=("$CAP_PID")
wait_for 10 grep -q 'listening on' "$T/tcpdump.log" || { cat "$T/tcpdump.log" >&2; die "tcpdump did not start"; }
sleep 0.3
O=$T/out
CURL=(timeout 20 curl -sS -w '%{http_code} %{size_download} %{num_connects}\n')
N=(-o /dev/null)   # curl needs one -o per URL
pause() { sleep 0.3; }

log "HTTP"
# four requests on one keep-alive connection (curl reuses the connection for all its URLs)
nsx "${CURL[@]}" "${N[@]}" http://127.0.0.1/ "${N[@]}" http://127.0.0.1/style.css \
    "${N[@]}" http://127.0.0.1/data/catalog.json "${N[@]}" http://127.0.0.1/missing.html \
    >"$O/http_keepalive.txt" 2>&1 || true
pause
# one request per connection, "Connection: close" (the server closes first)
nsx "${CURL[@]}" "${N[@]}" -H 'Connection: close' http://127.0.0.1/index.html >"$O/http_close.txt" 2>&1 || true
nsx "${CURL[@]}" "${N[@]}" -H 'Connection: close' http://127.0.0.1/old/page.html >>"$O/http_close.txt" 2>&1 || true
pause
nsx "${CURL[@]}" "${N[@]}" -I http://127.0.0.1/data/catalog.json >"$O/http_head.txt" 2>&1 || true
pause
nsx "${CURL[@]}" "${N[@]}" -H 'Content-Type: application/json' \
    --data-binary '{"probe":"wirelog","host":"www.demo.test","rtt_us":120}' \
    http://127.0.0.1/api/report >"$O/http_post.txt" 2>&1 || true
pause
nsx "${CURL[@]}" -g "${N[@]}" 'http://[::1]/index.html' "${N[@]}" 'http://[::1]/data/catalog.json' \
    >"$O/http_v6.txt" 2>&1 || true
pause
# client abort: nginx sends at 32 KB/s, curl reads at 4 KB/s and gives up after 2 s; it
# closes the socket with unread data, so the kernel sends a RST instead of a FIN
set +e
nsx timeout 20 curl -sS -o /dev/null --limit-rate 4k --max-time 2 -w '%{http_code} %{size_download} %{num_connects}\n' \
    http://127.0.0.1/slow/firmware.bin >"$O/http_abort.txt" 2>&1
echo "curl exit=$?" >>"$O/http_abort.txt"
set -e
# nginx logs the aborted request once its next write fails
wait_for 10 grep -q '/slow/' "$T/access.log" || log "warning: aborted request not in nginx access log"
pause

log "DNS"
DIG=(timeout 10 dig +tries=1 +time=2)
n=0
dq() {   # dq SERVER [dig args...]
    n=$((n+1))
    nsx "${DIG[@]}" @"$1" "${@:2}" >"$O/dig_$(printf %02d $n).txt" 2>&1 || true
}
dq 127.0.0.53 www.demo.test A
dq 127.0.0.53 www.demo.test AAAA
dq 127.0.0.53 demo.test MX
dq 127.0.0.53 nosuch.demo.test A
dq 127.0.0.53 +tcp db.demo.test A
dq ::1 www.demo.test AAAA
dq ::1 mail.demo.test A
dq ::1 cache.demo.test AAAA
dq ::1 missing.demo.test AAAA
pause

log "SQL"
SQL_OK="CREATE TABLE probes (id INT PRIMARY KEY AUTO_INCREMENT, host VARCHAR(64) NOT NULL, port INT, rtt_ms DECIMAL(6,2));
INSERT INTO probes (host, port, rtt_ms) VALUES ('www.demo.test', 80, 0.12), ('db.demo.test', 3306, 0.34), ('mail.demo.test', 25, 1.50);
SELECT id, host, port, rtt_ms FROM probes ORDER BY rtt_ms DESC;
SELECT host, rtt_ms FROM probe WHERE id = 1;
UPDATE probes SET rtt_ms = 0.10 WHERE host = 'www.demo.test';
SELECT COUNT(*) AS n, MAX(rtt_ms) AS worst FROM probes;"
printf '%s\n' "$SQL_OK" >"$O/sql_statements.txt"   # fed on stdin: -e would stop at the error
MARIADB=(timeout 20 mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P 3306 --skip-ssl)
set +e
nsx "${MARIADB[@]}" -udemo -pdemo-pass -D demo --force --table -vvv <"$O/sql_statements.txt" >"$O/sql_session.txt" 2>&1
echo "mariadb exit=$?" >>"$O/sql_session.txt"
pause
nsx "${MARIADB[@]}" -udemo -pwrong-password -D demo -e "SELECT 1" >"$O/sql_badlogin.txt" 2>&1
echo "mariadb exit=$?" >>"$O/sql_badlogin.txt"
set -e
pause

log "refused connects, UDP to a closed port"
nsx bash -c '
    for hp in 127.0.0.1/23 127.0.0.1/5432 127.0.0.1/8080 ::1/23 ::1/5432; do
        if err=$(timeout 5 bash -c "exec 3<>/dev/tcp/$hp" 2>&1); then r=connected
        else r=$(printf "%s\n" "$err" | grep -o "Connection refused" | head -n 1); r=${r:-failed}; fi
        echo "tcp ${hp%/*} port ${hp#*/}: $r"
    done
    for hp in 127.0.0.1/33434 ::1/33434; do
        timeout 5 bash -c "printf probe >/dev/udp/$hp" && echo "udp ${hp%/*} port ${hp#*/}: sent 5 bytes"
        sleep 0.2
    done
' >"$O/refused.txt" 2>&1 || true
pause

log "ICMP echo"
nsx timeout 10 ping -c 3 -i 0.2 -n 127.0.0.1 >"$O/ping4.txt" 2>&1 || true
nsx timeout 10 ping -6 -c 3 -i 0.2 -n ::1 >"$O/ping6.txt" 2>&1 || true

sleep 1
kill -INT "$CAP_PID" 2>/dev/null || true
wait "$CAP_PID" 2>/dev/null || true
grep -E 'captured|dropped' "$T/tcpdump.log" >&2 || true
if grep -E '^[1-9][0-9]* packets dropped by kernel' "$T/tcpdump.log" >/dev/null; then
    die "tcpdump dropped packets"
fi

# ---- what is in it ------------------------------------------------------------------------------
log "writing $OUT_DIR/sample.txt"
PKTS=$(capinfos -M -c "$PCAP" | awk -F: '/Number of packets/{gsub(/ /,"",$2);print $2}')
DUR=$(capinfos -M -u "$PCAP" | awk -F: '/Capture duration/{split($2,a," ");print a[1]}')
TCPC=$(tshark -n -r "$PCAP" -q -z conv,tcp 2>/dev/null | grep -c '<->' || true)
UDPC=$(tshark -n -r "$PCAP" -q -z conv,udp 2>/dev/null | grep -c '<->' || true)
# cross-check: what the tools say was sent must be in the capture
tcount() { tshark -n -r "$PCAP" -Y "$1" 2>/dev/null | wc -l; }
C_HTTP=$(tcount 'http.request'); C_DNSQ=$(tcount 'dns.flags.response == 0')
C_ECHO=$(tcount 'icmp.type == 0 || icmpv6.type == 129'); C_UNR=$(tcount 'icmp.type == 3 || icmpv6.type == 1')
C_RST=$(tcount 'tcp.flags.reset == 1'); C_SQL=$(tcount 'mysql.command')
N_HTTP=$(wc -l <"$T/access.log"); N_DNS=$(ls "$O"/dig_*.txt | wc -l)
[[ $C_HTTP -eq $N_HTTP && $C_DNSQ -eq $N_DNS && $C_ECHO -eq 6 && $C_UNR -eq 2 && $C_RST -ge 6 ]] ||
    die "capture incomplete: http=$C_HTTP/$N_HTTP dns=$C_DNSQ/$N_DNS echo-replies=$C_ECHO/6 unreachable=$C_UNR/2 rst=$C_RST/>=6"
{
    echo "sample.pcap.gz - wirelog demo capture (real traffic, recorded by samples/record-sample.sh)"
    echo
    echo "All traffic is between loopback addresses of a private network namespace (link type"
    echo "Ethernet, as Linux captures lo). Servers: nginx 127.0.0.1:80 and [::1]:80,"
    echo "dnsmasq 127.0.0.53:53 and [::1]:53, MariaDB 127.0.0.1:3306."
    echo
    echo "capture: $PKTS packets (capinfos -c), ${DUR}s, $TCPC TCP and $UDPC UDP conversations (tshark -z conv)"
    echo "tshark finds: $C_HTTP HTTP requests, $C_DNSQ DNS queries, $C_SQL MySQL commands, $C_RST TCP RSTs,"
    echo "  $C_ECHO ICMP/ICMPv6 echo replies, $C_UNR ICMP/ICMPv6 port unreachable"
    echo
    echo "== HTTP: $(wc -l <"$T/access.log") requests (nginx access log: client \"request\" status bytes connection request-on-connection)"
    sed 's/^/  /' "$T/access.log"
    echo "  by status:"
    awk '{print $(NF-3)}' "$T/access.log" | sort | uniq -c | sed 's/^ */    /'
    echo "  client side (curl: status bytes connects):"
    echo "    keep-alive, 4 URLs on one connection: $(tr '\n' ';' <"$O/http_keepalive.txt")"
    echo "    Connection: close, 2 requests:        $(tr '\n' ';' <"$O/http_close.txt")"
    echo "    HEAD:                                 $(tr '\n' ';' <"$O/http_head.txt")"
    echo "    POST:                                 $(tr '\n' ';' <"$O/http_post.txt")"
    echo "    IPv6, 2 URLs on one connection:       $(tr '\n' ';' <"$O/http_v6.txt")"
    echo "    aborted download (--max-time 2):      $(tr '\n' ';' <"$O/http_abort.txt")"
    echo "  nginx error log (aborted request):"
    grep -E 'prematurely|reset by peer' "$T/nginx-error.log" | sed -E 's/^[0-9\/: ]+//; s/^/    /' || true
    echo
    echo "== DNS: $(ls "$O"/dig_*.txt | wc -l) queries with dig (server, transport, question -> status, answers)"
    for f in "$O"/dig_*.txt; do
        awk '
            /^;; SERVER:/            { split($3, s, "#"); srv = s[1]; tr = $NF; gsub(/[()]/, "", tr) }
            /^;; ->>HEADER<<-/       { st = $6; sub(/,$/, "", st) }
            /^;; QUESTION SECTION:/  { q = 1; next }
            q && /^;/                { sub(/^;/, ""); qn = $1; qt = $3; q = 0 }
            /^;; flags:/             { for (i = 1; i <= NF; i++) if ($i == "ANSWER:") an = $(i+1) + 0 }
            /^;; ANSWER SECTION:/    { a = 1; next }
            a && /^$/                { a = 0 }
            a                        { ans = ans (ans ? ", " : "") $4 " " $5 (NF > 5 ? " " $6 : "") }
            END { printf "  %-11s %-4s %-20s %-5s -> %s, %d answer(s)%s\n", srv, tr, qn, qt, st, an,
                        (ans ? ": " ans : (st == "NOERROR" ? " (NODATA)" : "")) }
        ' "$f"
    done
    echo "  by status:"
    cat "$O"/dig_*.txt | awk '/^;; ->>HEADER<<-/{s=$6; sub(/,$/,"",s); print s}' | sort | uniq -c | sed 's/^ */    /'
    echo "  dnsmasq log: $(tail -n +$((DNSMASQ_LOG0 + 1)) "$T/dnsmasq.log" | grep -c 'query\[' || true) queries received during the capture"
    echo
    echo "== SQL: MariaDB, mariadb client over TCP to 127.0.0.1:3306, user demo, database demo"
    echo "  session 1 (login OK, --force), $(grep -c ';$' "$O/sql_statements.txt") statements:"
    sed 's/^/    /' "$O/sql_statements.txt"
    echo "  client output (-vvv --table, statements elided):"
    grep -vE '^(CREATE|INSERT|SELECT|UPDATE|-+$|[[:space:]]*$)' "$O/sql_session.txt" | sed 's/^/    /'
    echo "  session 2 (wrong password):"
    sed 's/^/    /' "$O/sql_badlogin.txt"
    echo
    echo "== refused connects / closed ports:"
    sed 's/^/  /' "$O/refused.txt"
    echo
    echo "== ICMP echo:"
    grep -h -E 'packets transmitted' "$O/ping4.txt" | sed 's/^/  127.0.0.1: /'
    grep -h -E 'packets transmitted' "$O/ping6.txt" | sed 's/^/  ::1:       /'
} >"$T/sample.txt"

# On lo the kernel never fills in TCP/UDP checksums (offloading), so the raw
# capture would need -C. Recompute them, so the demo reads like a capture
# from a NIC without offloading (packets are otherwise unchanged).
tcprewrite --fixcsum --infile="$PCAP" --outfile="$T/fixed.pcap"
gzip -9 -n -c "$T/fixed.pcap" >"$T/sample.pcap.gz"
mv -f "$T/sample.pcap.gz" "$OUT_DIR/sample.pcap.gz"
mv -f "$T/sample.txt" "$OUT_DIR/sample.txt"
rm -f "$OUT_DIR/sample.pcap"
log "done: $OUT_DIR/sample.pcap.gz ($(stat -c %s "$OUT_DIR/sample.pcap.gz") bytes, $PKTS packets)"
