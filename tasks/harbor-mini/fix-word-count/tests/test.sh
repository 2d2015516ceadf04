#!/bin/sh
ok=0
printf 'one two  three\nfour\n\nfive six\n' > /tmp/words.txt
out=$(sh /app/count_words.sh /tmp/words.txt 2>/dev/null | tr -d ' ')
printf 'solo\n' > /tmp/one.txt
one=$(sh /app/count_words.sh /tmp/one.txt 2>/dev/null | tr -d ' ')
[ "$out" = 6 ] && [ "$one" = 1 ] && ok=1
if [ "$ok" = 1 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
