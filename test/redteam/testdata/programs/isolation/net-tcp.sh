# TCP egress from a shell through bash's /dev/tcp: $1 is a port the test
# listens on at the host's 127.0.0.1. Refused: our loopback is our own.
if out=$( { exec 3<>/dev/tcp/127.0.0.1/$1; echo "LEAK from sandbox" >&3; } 2>&1 ); then
  echo "tcp CONNECTED"
else
  case "$out" in *"Connection refused"*) echo "tcp ECONNREFUSED";; *) echo "tcp FAILED: $out";; esac
fi
if out=$( { echo "LEAK from sandbox" > /dev/udp/127.0.0.1/$2; } 2>&1 ); then echo "udp sent"; else echo "udp FAILED: $out"; fi
