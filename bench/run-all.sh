#!/bin/sh
# make bench: every benchmark, results in bench/results/*.md (with the machine's description).
set -eu
cd "$(dirname "$0")/.."
python3 bench/access.py
python3 bench/hotpath.py
python3 bench/overhead.py
python3 bench/async.py
python3 bench/durability.py
python3 bench/iokeys.py
python3 bench/accuracy.py
python3 bench/flow.py
python3 bench/sched.py
python3 bench/place.py
python3 bench/netstack.py
