#!/bin/sh
uname -r
for m in 1 4 5; do echo "== mode $m validation"; ./cost $m 0 2>&1 | grep -v '^libbpf: prog\|^[0-9]*:' | tail -3; done
for m in 0 1 4 5 6 2; do ./cost $m 5000 2>&1 | head -1; done
