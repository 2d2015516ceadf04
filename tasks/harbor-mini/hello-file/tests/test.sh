#!/bin/sh
ok=0
[ "$(cat /app/greeting.txt 2>/dev/null)" = "Hello, Harbor!" ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
