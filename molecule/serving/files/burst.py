#!/usr/bin/python3
"""POST N chat requests at once to URL; print a JSON summary of the status codes."""

import collections
import json
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

url, count = sys.argv[1], int(sys.argv[2])
body = json.dumps({"model": "tiny-moe", "messages": [{"role": "user", "content": "hi"}]}).encode()


def one(_):
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


with ThreadPoolExecutor(max_workers=count) as pool:
    results = list(pool.map(one, range(count)))
print(json.dumps({"status": dict(collections.Counter(str(code) for code in results))}))
