"""dbt-tests-adapter's fixtures (`project`, `models`, `seeds`, ...), for this folder only.

pytest accepts `pytest_plugins` only in the rootdir conftest; importing the fixtures here keeps
their generic names (`project`, `adapter`, ...) away from the rest of the suite.
"""
from dbt.tests.fixtures.project import *  # noqa: F401,F403
