"""CellFilter: a request that names a cell only goes to hosts of that cell."""


class CellFilter:
    name = "CellFilter"
    reason = "host is not in the requested cell"

    def node_fields(self, spec):
        return {"cell"} if spec.cell is not None else set()

    def host_passes(self, host, spec):
        return spec.cell is None or host.cell == spec.cell
