"""The wire part of `routing.remoting`: frames, codes and bodies, sans-I/O.

``_codes`` (request, response and language codes, versions), ``_codec`` (`RemotingCommand`,
`encode`, one frame's decoding, the `ProtocolError` family), ``_frame_decoder``
(`FrameDecoder`: a byte stream cut into frames; `decode`), ``_header_cache`` (a
connection's repeated JSON headers) and ``_bodies`` (the JSON bodies in both of fastjson's
dialects). Nothing here imports the processor or a host. Import the names from
`routing.remoting`.
"""
