"""The power-loss file layer moved into the package (``natsd.testing.faultfs``), where a
user's tests reach it too; the reliability suite imports it from here as before."""

from natsd.testing.faultfs import Crash, FaultFS

__all__ = ["Crash", "FaultFS"]
