"""The pure parts of :mod:`lean_env.landlock`: which rights each ABI handles, what a
rule may grant, how much of the ruleset attribute a kernel is given."""

from __future__ import annotations

import pytest

from lean_env import landlock as ll


def test_abi_1_handles_the_write_rights_and_nothing_to_read_or_run():
    rights = ll.handled_fs(1)
    for right in (ll.FS_WRITE_FILE, ll.FS_REMOVE_DIR, ll.FS_REMOVE_FILE, ll.FS_MAKE_CHAR, ll.FS_MAKE_DIR,
                  ll.FS_MAKE_REG, ll.FS_MAKE_SOCK, ll.FS_MAKE_FIFO, ll.FS_MAKE_BLOCK, ll.FS_MAKE_SYM):
        assert rights & right
    assert not rights & (ll.FS_READ_FILE | ll.FS_READ_DIR | ll.FS_EXECUTE)
    assert not rights & (ll.FS_REFER | ll.FS_TRUNCATE | ll.FS_IOCTL_DEV)


@pytest.mark.parametrize("abi, added", [(2, ll.FS_REFER), (3, ll.FS_TRUNCATE), (5, ll.FS_IOCTL_DEV)])
def test_later_abis_add_their_rights(abi, added):
    assert not ll.handled_fs(abi - 1) & added
    assert ll.handled_fs(abi) & added and ll.handled_fs(7) & added


def test_no_abi_handles_nothing():
    assert ll.handled_fs(0) == ll.handled_net(0) == ll.scoped(0) == 0


def test_network_from_abi_4_and_scopes_from_abi_6():
    assert ll.handled_net(3) == 0 and ll.handled_net(4) == ll.NET_BIND_TCP | ll.NET_CONNECT_TCP
    assert ll.scoped(5) == 0 and ll.scoped(6) == ll.SCOPE_ABSTRACT_UNIX_SOCKET | ll.SCOPE_SIGNAL


def test_a_rule_on_a_file_grants_only_file_rights():
    handled = ll.handled_fs(7)
    assert ll.allowed_for(handled, is_dir=True) == handled
    on_file = ll.allowed_for(handled, is_dir=False)
    assert on_file == ll.FS_WRITE_FILE | ll.FS_TRUNCATE | ll.FS_IOCTL_DEV
    assert ll.allowed_for(ll.handled_fs(1), is_dir=False) == ll.FS_WRITE_FILE


def test_the_attribute_grows_with_the_abi():
    # fs only (8 bytes), + net (16), + scoped (24): a kernel rejects fields it does not know
    assert [ll.ruleset_attr_size(abi) for abi in (1, 3, 4, 5, 6, 7)] == [8, 8, 16, 16, 24, 24]


def test_without_landlock_restrict_self_raises_and_changes_nothing():
    with pytest.raises(ll.LandlockError):
        ll.restrict_self(["/tmp"], abi=0)
