#!/bin/sh
ok=0
[ "$(tr -d ' \n' < /app/total.txt 2>/dev/null)" = 1234 ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
