#!/usr/bin/env python3
"""Verifies one captured webhook request with the reference Standard Webhooks
library from PyPI (`pip install standardwebhooks`), independently of the
server's own code.

Reads a JSON object on stdin:
  {"secret": "whsec_...", "headers": {"webhook-id": ...}, "body_b64": "..."}
Exit status: 0 verified, 1 refused, 3 the library is not installed,
2 bad input.
"""

import base64
import json
import sys

try:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError
except ImportError as e:  # never a silent pass: the caller fails on 3
    print(f"standardwebhooks is not installed: {e}", file=sys.stderr)
    sys.exit(3)


def main() -> int:
    try:
        req = json.load(sys.stdin)
        secret = req["secret"]
        headers = dict(req["headers"])
        body = base64.b64decode(req["body_b64"])
    except (ValueError, KeyError, TypeError) as e:
        print(f"bad input: {e}", file=sys.stderr)
        return 2
    try:
        Webhook(secret).verify(body, headers)
    except WebhookVerificationError as e:
        print(f"refused: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
