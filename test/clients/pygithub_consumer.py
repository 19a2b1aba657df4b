"""Reads through etagere with PyGithub holding a consumer key where a GitHub token would go.

Usage: ETAGERE_KEY=<key> pygithub_consumer.py BASE_URL FORM USER ORG

FORM is `login_or_token` (`Github(login_or_token=key)`: PyGithub sends `Authorization: token
<key>`) or `login_password` (`Github(key, "")`: Basic credentials, the key as the user). The key
comes from the environment, so it is never on a command line. Prints one JSON document on stdout;
any failure is a traceback on stderr and a non-zero exit.
"""

import json
import os
import sys

from github import Github


def client(base_url, form, key):
    if form == "login_or_token":
        return Github(login_or_token=key, base_url=base_url, per_page=2, timeout=15, retry=None)
    if form == "login_password":
        return Github(key, "", base_url=base_url, per_page=2, timeout=15, retry=None)
    raise SystemExit("unknown form " + form)


def main(argv):
    base_url, form, user_login, org_login = argv[1], argv[2], argv[3], argv[4]
    github = client(base_url, form, os.environ["ETAGERE_KEY"])
    user = github.get_user(user_login)
    repos = list(github.get_organization(org_login).get_repos())  # the Link pages, with the key again
    print(json.dumps({"login": user.login, "repos": len(repos)}))


if __name__ == "__main__":
    main(sys.argv)
