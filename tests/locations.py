"""Where the tests find things: the repository, ``../shared`` beside it, and tests/fixtures."""
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
FIXTURES = TESTS / "fixtures"
