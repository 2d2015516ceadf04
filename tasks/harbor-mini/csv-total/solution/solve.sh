#!/bin/sh
set -e
awk -F, 'NR > 1 { s += $2 } END { print s }' /app/sales.csv > /app/total.txt
