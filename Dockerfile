# mesh-mcp as a container: the MCP server over streamable HTTP, authenticated by a bearer token.
#   docker build -t mesh-flow-mcp .
#   docker run --rm -p 127.0.0.1:8765:8765 -e MESH_HTTP_TOKEN \
#     -v /path/to/workspace:/workspace:ro -v /path/to/mesh.toml:/config/mesh.toml:ro \
#     mesh-flow-mcp serve --workspace /workspace --config /config/mesh.toml --http 0.0.0.0:8765
# Without MESH_HTTP_TOKEN the server refuses to bind 0.0.0.0 (see docs/install.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
COPY tools ./tools
COPY resources ./resources
COPY skills ./skills
RUN pip install . && rm -rf /src

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin mesh
USER mesh
WORKDIR /home/mesh
# plans, backups, the audit log and the index cache live here, not in the (read-only) workspace
ENV MESH_STATE_DIR=/home/mesh/state
# one server per container: a stdio client (docker run -i ... serve) serves in-process, no shared server
ENV MESH_STANDALONE=1

EXPOSE 8765
ENTRYPOINT ["mesh-mcp"]
CMD ["serve", "--http", "0.0.0.0:8765"]
