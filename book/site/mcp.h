// The book's MCP server at /api/mcp, over Streamable HTTP: each POST carries
// one JSON-RPC 2.0 message and gets one application/json answer (no SSE
// stream; GET is 405). Three protocol revisions on the one endpoint:
//
//   2025-06-18, 2025-11-25  the initialize handshake, then tools/list,
//                           tools/call and ping; the server keeps no session
//                           (each POST is answered on its own).
//   2026-07-28              stateless: no handshake; every request carries
//                           io.modelcontextprotocol/protocolVersion and
//                           .../clientCapabilities in params._meta, and the
//                           MCP-Protocol-Version and Mcp-Method headers
//                           mirror the body; server/discover lists the
//                           supported versions and capabilities.
//
// A browser Origin other than localhost or the server's own IP address gets
// 403 (DNS rebinding). server/discover lists all three versions; the first two
// are reached through initialize.
//
// A request is served under 2026-07-28 when its _meta names a protocol
// version, its MCP-Protocol-Version header names a version outside the
// handshake ones, or it is server/discover; under the handshake otherwise.
#pragma once

#include "book/site/book_index.h"
#include "book/site/mcp_tools.h"
#include "server/http/http_server.h"

namespace minfer::book {

class McpServer {
public:
    explicit McpServer(const Book& book);  // `book` must outlive the server
    HttpResponse handle(const HttpRequest& request) const;

private:
    BookTools tools_;
};

}  // namespace minfer::book
