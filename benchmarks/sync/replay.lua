-- Sends the pre-signed requests written by presign.py, each once, in order (one wrk thread).
-- A signed request is accepted once, so the file must hold more than a run sends: a request
-- sent twice is refused as a replay and shows in wrk's "Non-2xx" count.
local requests, index = nil, 0

function init(args)
  requests = dofile(args[1])
end

function request()
  index = index % #requests + 1
  return requests[index]
end
