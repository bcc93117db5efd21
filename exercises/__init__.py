"""The nbgrader course: source/ (with solutions), release/ (for students), keys/ and build.py."""
