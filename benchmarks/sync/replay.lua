-- Sends the pre-signed requests written by presign.py, each once, in order (one wrk thread).
-- A signed request is accepted once, so the file must hold more than a run sends: a request
-- sent twice is refused as a replay and shows in wrk's "Non-2xx" count.
-- A second argument paces the run: each connection waits that many milliseconds after each
-- answer before its next request (wrk has no fixed-rate mode; this holds the load below peak).
-- wrk waits whole milliseconds, so a fractional pause is drawn as the whole milliseconds on
-- either side of it, in the proportion that makes its mean.
local requests, index = nil, 0

function init(args)
  requests = dofile(args[1])
  local pause = tonumber(args[2])
  if pause then
    local whole = math.floor(pause)
    local fraction = pause - whole
    function delay()
      if math.random() < fraction then return whole + 1 end
      return whole
    end
  end
end

function request()
  index = index % #requests + 1
  return requests[index]
end
