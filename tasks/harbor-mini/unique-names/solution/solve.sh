#!/bin/sh
set -e
tr 'A-Z' 'a-z' < /app/names.txt | sort -u > /app/unique.txt
