"""One module per method; every model implements the OnlineGP protocol (``onlinegp.base``)."""

from .exact import ExactGP
from .ovc import OVC, OVCpp
from .poam import FULL, PAM, POAM

__all__ = ["POAM", "PAM", "FULL", "OVC", "OVCpp", "ExactGP"]
