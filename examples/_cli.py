"""The command line every example shares: ``--backend``, ``--devices``, ``--seed``, ``--json``."""

from __future__ import annotations

import argparse
import json
from typing import Any

import toolkit
from toolkit.placement.devices import logical_device_count


def parser(doc: str) -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    result.add_argument("--backend", choices=["tensorflow", "aesara"], default="tensorflow")
    result.add_argument("--devices", type=int, default=2, help="devices to use: GPUs, or logical CPU devices")
    result.add_argument("--seed", type=int, default=0)
    result.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    return result


def prepare(args: argparse.Namespace, logical: int | None = None):
    """Make the logical CPU devices (unless this process already has them) and load the backend."""
    if args.devices < 1:
        raise SystemExit(f"--devices must be >= 1, got {args.devices}")
    if logical_device_count() is None:
        toolkit.use_logical_devices(logical or args.devices)
    return toolkit.get_backend(args.backend)


def report(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    for line in lines:
        print(line)
    if args.json:
        print(json.dumps(result))
    return result
