#!/bin/sh
set -e
mkdir -p /app/site
printf 'ready\n' > /app/site/status.txt
printf 'port=8085\nroot=/app/site\n' > /app/service.conf
