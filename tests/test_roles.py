"""File roles from paths: the soft ranking prior's input."""

from __future__ import annotations

import pytest

from codii_sql.ingest.roles import classify


@pytest.mark.parametrize("path, role", [
    ("src/app/views.py", "source"), ("bin/run", "source"), ("src/X", "source"),
    ("tests/test_views.py", "test"), ("pkg/views_test.go", "test"), ("web/a.spec.ts", "test"),
    ("docs/index.rst", "docs"), ("README.md", "docs"), ("CHANGES", "changelog"), ("CHANGELOG.md", "changelog"), ("docs/history.rst", "changelog"),
    ("changelog/1234.bugfix.rst", "changelog"), ("src/history.py", "source"), ("HISTORY.rst", "changelog"),
    ("news/index.html", "source"), ("NEWS", "changelog"), ("django/middleware/security.py", "source"),
    ("SECURITY.md", "docs"), ("EXAMPLES", "docs"),
    ("utils/INSTALL", "docs"), ("LICENSE", "docs"),
    ("setup.cfg", "config"), ("Makefile", "config"), ("BUILD", "config"), (".github/workflows/ci.yml", "config"),
    ("requests-2.3.0.dist-info/METADATA", "config"),
    ("Alamofire.xcodeproj/project.pbxproj", "config"), ("Source/Info.plist", "config"),
    ("src/MediatR/MediatR.csproj", "config"), ("MediatR.sln", "config"), ("Directory.Build.props", "config"),
    ("requests/packages/urllib3/poolmanager.py", "vendored"), ("third_party/x/y.c", "vendored"),
    ("deps/hiredis/dict.c", "vendored"), ("src/deps.c", "source"),
    ("api/service_pb2.py", "generated"), ("static/app.min.js", "generated"),
    ("django/conf/locale/de/LC_MESSAGES/django.po", "data"), ("po/messages.pot", "data"),
    ("benchsuite/runs/2016-09-22/summary.csv", "data"), ("sig/v1.6/jq-linux64.asc", "data"),
    ("django/conf/locale/de/formats.py", "source"),
])
def test_roles(path, role):
    assert classify(path) == role
