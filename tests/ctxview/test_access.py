"""Role ranks: viewer < editor < admin."""

from ctxview.access import role_at_least
from ingest.models import Membership

Role = Membership.Role


def test_a_higher_role_may_do_what_a_lower_one_may_and_a_stranger_nothing():
    assert role_at_least(Role.ADMIN, Role.EDITOR) and role_at_least(Role.EDITOR, Role.EDITOR)
    assert role_at_least(Role.VIEWER, Role.VIEWER)
    assert not role_at_least(Role.VIEWER, Role.EDITOR) and not role_at_least(Role.EDITOR, Role.ADMIN)
    assert not role_at_least(None, Role.VIEWER)
