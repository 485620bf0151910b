// LoopbackDynamoDBLocal runs AWS DynamoDB Local listening on 127.0.0.1 only.
//
// DynamoDBLocal.jar has no host option: its Jetty server binds every
// interface. This launcher builds the server exactly as the jar's own main
// does (ServerRunner.createServerFromCommandLineArgs, same arguments), sets
// the host of its Jetty connectors to 127.0.0.1, then starts it. If a
// future DynamoDB Local is built differently, it fails to start rather than
// listen on every interface.
//
// scripts/services.sh compiles it once (javac, classpath DynamoDBLocal.jar)
// into its cache; internal/testenv runs it as a source file (java
// LoopbackDynamoDBLocal.java) when there is no compiled copy.
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackDynamoDBLocal {
    private static final String HOST = "127.0.0.1";

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server jetty = (Server) field.get(proxy);
        int bound = 0;
        for (Connector c : jetty.getConnectors()) {
            if (!(c instanceof ServerConnector)) {
                throw new IllegalStateException("unexpected Jetty connector " + c.getClass().getName());
            }
            ((ServerConnector) c).setHost(HOST);
            bound++;
        }
        if (bound == 0) {
            throw new IllegalStateException("DynamoDB Local has no Jetty connector to bind to " + HOST);
        }
        System.err.println("LoopbackDynamoDBLocal: listening on " + HOST + " only");
        proxy.start();
    }
}
