"""Facades with other memory libraries' APIs over memlane, so code written for them runs on memlane with its
import changed: :mod:`memlane.compat.mem0`."""
