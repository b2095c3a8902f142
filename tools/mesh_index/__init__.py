"""tools.mesh_index"""
