#!/bin/sh
# Start busybox httpd in the background from /app/service.conf (key=value lines).
port=$(sed -n 's/^port=//p' /app/service.conf)
root=$(sed -n 's/^root=//p' /app/service.conf)
httpd -p "127.0.0.1:${port:-80}" -h "${root:-/var/www}"
