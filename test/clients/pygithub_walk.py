"""Walks the GitHub API through etagere with PyGithub, as a newcomer's script would.

Usage: pygithub_walk.py BASE_URL USER ORG PER_PAGE

Anonymous (no token: the proxy's pool supplies one). PyGithub follows the Link headers of list
pages and the URLs inside response bodies (`repos_url`, an owner's `url`, ...), and asserts that
each one is on BASE_URL's host and port, so every request of this walk must stay on the proxy.
Prints one JSON document on stdout; any failure is a traceback on stderr and a non-zero exit.
"""

import json
import sys

from github import Github


def summary(repo):
    """What the test compares with the fake's data (no lazy attribute: no request)."""
    return {"id": repo.id, "full_name": repo.full_name, "owner": repo.owner.login}


def main(argv):
    base_url, user_login, org_login, per_page = argv[1], argv[2], argv[3], int(argv[4])
    client = Github(base_url=base_url, per_page=per_page, timeout=15, retry=None)

    user = client.get_user(user_login)
    user_repos = list(user.get_repos())  # GET <user's url>/repos, then the Link pages
    org = client.get_organization(org_login)
    org_repos = list(org.get_repos())  # GET <org's url>/repos, then the Link pages

    # repo.owner is a summary: reading its name completes it with GET <owner's url>, a body URL.
    owners = {
        "user": {"login": user_repos[0].owner.login, "name": user_repos[0].owner.name},
        "org": {"login": org_repos[-1].owner.login, "name": org_repos[-1].owner.name},
    }
    print(
        json.dumps(
            {
                "user": {"login": user.login, "name": user.name},
                "org": {"login": org.login, "name": org.name},
                "user_repos": [summary(repo) for repo in user_repos],
                "org_repos": [summary(repo) for repo in org_repos],
                "owners": owners,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv)
