"""A worker of :func:`toolkit.command.bench.run.run_bench`: one model at one device count (or the machine's peak), the
request as JSON in argv, the measurements as JSON on stdout's last line."""

import json
import sys

from toolkit.command.bench.measure import measure

print(json.dumps(measure(json.loads(sys.argv[1]))))
