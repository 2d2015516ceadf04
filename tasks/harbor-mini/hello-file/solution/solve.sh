#!/bin/sh
set -e
printf 'Hello, Harbor!\n' > /app/greeting.txt
