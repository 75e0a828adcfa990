#!/bin/sh
echo "kernels: kernel $(uname -r)"
sandtrail keys generate >/dev/null 2>&1
sandtrail run --user nobody -- sh -c 'true' 2>&1
echo "kernels: run exit $?"
