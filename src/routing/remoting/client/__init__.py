"""The client part of `routing.remoting`: what a RocketMQ client asks a name server.

``_route_query`` (`query_route`, `query_route_async`: one GET_ROUTEINFO_BY_TOPIC on its
own connection, Java ``MQClientAPIImpl.getTopicRouteInfoFromNameServer``;
`RouteQueryError`). Imports the wire part only. Import the names from `routing.remoting`.
"""
