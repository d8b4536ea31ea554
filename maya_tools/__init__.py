"""maya_tools."""
